package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderjob/executor/orders/refunds"
)

func refundsCommand() *command {
	return &command{name: "refunds", summary: "refunds owed for late and duplicate payments (payment_conflict); -json for machines",
		sub: []*command{
			{name: "owed", summary: "how many refunds are owed, their sum, the oldest", flags: viewVerb(refunds.New, refundOwed)},
			{name: "list", summary: "list payment conflicts, newest first", flags: refundList},
			{name: "show", args: "PAYMENT_ID", summary: "show one payment conflict", flags: viewVerb(refunds.New, refundShow)},
			{name: "mark-refunded", args: "PAYMENT_ID", summary: "record that the payment was paid back, and who did", flags: refundMark},
		}}
}

// refundCtx is what every refunds verb gets.
type refundCtx = viewCtx[*refunds.Ops]

func refundOwed(ctx context.Context, rc *refundCtx, _ []string) error {
	return runView(ctx, rc, func(ctx context.Context) (refunds.Summary, error) { return rc.view.Owed(ctx) }, printOwed)
}

// printOwed writes what is owed as a table.
func printOwed(w io.Writer, o refunds.Summary) error {
	oldest := "-"
	if o.Oldest != nil {
		oldest = fmt.Sprintf("%s (%s ago)", o.Oldest.Format(letterTimeLayout), o.OldestAge.Round(time.Second))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "refunds owed\t%d\n", o.Count)
	fmt.Fprintf(tw, "amount owed\t%s\n", o.Amount)
	fmt.Fprintf(tw, "oldest owed\t%s\n", oldest)
	fmt.Fprintf(tw, "conflicts recorded\t%d (refunded or not)\n", o.Total)
	return tw.Flush()
}

func refundList(fs *flag.FlagSet, env *cliEnv) runFunc {
	rc := newViewCtx(fs, env, refunds.New)
	lf := addListFlags(fs, "payment conflicts", "owed or refunded")
	order := fs.String("order", "", "only this order's payments")
	return func(ctx context.Context, _ []string) error {
		if err := lf.check(); err != nil {
			return err
		}
		return listRefunds(ctx, rc, refunds.Filter{Status: strings.ToLower(*lf.status), OrderNo: *order, Limit: *lf.limit, BeforeID: *lf.before})
	}
}

func listRefunds(ctx context.Context, rc *refundCtx, f refunds.Filter) error {
	return runView(ctx, rc, func(ctx context.Context) (refunds.Listing, error) { return rc.view.List(ctx, f) }, printRefunds)
}

// printRefunds writes a page of payment conflicts as a table.
func printRefunds(w io.Writer, l refunds.Listing) error {
	rows := make([]string, len(l.Conflicts))
	for i, p := range l.Conflicts {
		rows[i] = fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s", p.ID, p.PaymentID, p.OrderNo, p.Amount, p.Reason,
			p.Channel, p.RefundStatus, p.PaidAt.Format(letterTimeLayout))
	}
	return printListing(w, "payment conflicts", "ID\tPAYMENT_ID\tORDER_NO\tAMOUNT\tREASON\tCHANNEL\tREFUND\tPAID_AT", rows, l.NextBefore)
}

func printConflict(w io.Writer, p *refunds.Conflict) error {
	refunded := "-"
	if p.RefundedAt != nil {
		refunded = p.RefundedAt.Format(letterTimeLayout)
	}
	return printFields(w, [][2]string{
		{"paymentId", p.PaymentID}, {"orderNo", p.OrderNo}, {"amount", p.Amount}, {"reason", p.Reason},
		{"channel", p.Channel}, {"refundStatus", p.RefundStatus}, {"refundedAt", refunded}, {"refundNote", p.RefundNote}, {"refundedBy", p.RefundedBy},
		{"paidAt", p.PaidAt.Format(letterTimeLayout)}, {"createdAt", p.CreatedAt.Format(letterTimeLayout)},
	})
}

// oneConflict runs a verb about one payment and prints its row; a refund
// recorded before is shown, then the refusal.
func oneConflict(ctx context.Context, rc *refundCtx, pos []string,
	op func(ctx context.Context, paymentID string) (*refunds.Conflict, error)) error {
	return runOne(ctx, rc, func(ctx context.Context) (*refunds.Conflict, error) { return op(ctx, pos[0]) },
		refunds.ErrNotFound, fmt.Errorf("no payment conflict with payment id %q", pos[0]), printConflict)
}

func refundShow(ctx context.Context, rc *refundCtx, pos []string) error {
	return oneConflict(ctx, rc, pos, func(ctx context.Context, id string) (*refunds.Conflict, error) {
		return rc.view.Get(ctx, id)
	})
}

func refundMark(fs *flag.FlagSet, env *cliEnv) runFunc {
	rc := newViewCtx(fs, env, refunds.New)
	note := fs.String("note", "", "what to keep with it, e.g. the payment side's refund id (at most 255 bytes)")
	by := fs.String("by", cliOperator(), "who records the refund (default: the OS user, cli:USER)")
	return func(ctx context.Context, pos []string) error {
		return oneConflict(ctx, rc, pos, func(ctx context.Context, id string) (*refunds.Conflict, error) {
			return rc.view.MarkRefunded(ctx, id, *note, *by)
		})
	}
}

// cliOperator names who runs a CLI action when they do not say: the OS
// user, marked as coming from the CLI.
func cliOperator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return truncateBytes("cli:"+u.Username, 64)
	}
	return "cli"
}

func truncateBytes(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
