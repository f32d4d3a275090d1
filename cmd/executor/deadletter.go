package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/orderjob/executor/orders/deadletters"
)

func deadLetterCommand() *command {
	return &command{name: "deadletter", summary: "inspect and requeue dead letters (order_dead_letter); -json for machines",
		sub: []*command{
			{name: "list", summary: "list dead letters, newest first", flags: deadLetterList},
			{name: "show", args: "ORDERNO", summary: "show one order's dead letter", flags: deadLetterShow},
			{name: "requeue", args: "[ORDERNO]", flags: deadLetterRequeue,
				summary: "requeue one order's letter, or with -status every matching letter (parked or waiting → waiting, due now)",
				note: "one letter:            executor deadletter requeue ORDERNO [-stage S]\n" +
					"every matching letter: executor deadletter requeue -status parked|waiting [-error-like TEXT] [-since TIME|DURATION] [-dry-run]"},
		}}
}

// deadLetterCtx is what every deadletter verb gets.
type deadLetterCtx = viewCtx[*deadletters.Ops]

// letterTimeLayout is the table layout of dead-letter times (the database session's
// wall clock).
const letterTimeLayout = "2006-01-02 15:04:05.000"

func deadLetterList(fs *flag.FlagSet, env *cliEnv) runFunc {
	dc := newViewCtx(fs, env, deadletters.New)
	lf := addListFlags(fs, "dead letters", "waiting, parked or resolved")
	stage := fs.String("stage", "", "only this stage (close, ...)")
	return func(ctx context.Context, _ []string) error {
		if err := lf.check(); err != nil {
			return err
		}
		return listLetters(ctx, dc, deadletters.Filter{Status: *lf.status, Stage: *stage, Limit: *lf.limit, BeforeID: *lf.before})
	}
}

func listLetters(ctx context.Context, dc *deadLetterCtx, f deadletters.Filter) error {
	st := strings.ToLower(f.Status)
	if st != "" && !deadletters.ValidStatus(st) {
		return usagef("-status %q is not waiting, parked or resolved", f.Status)
	}
	f.Status = st
	return runView(ctx, dc, func(ctx context.Context) (deadletters.Listing, error) {
		dls, err := dc.view.List(ctx, f)
		var next int64
		if len(dls) == f.Limit {
			next = dls[len(dls)-1].ID
		}
		return deadletters.Listing{DeadLetters: dls, NextBefore: next}, err
	}, printLetters)
}

// printLetters writes a page of letters as a table.
func printLetters(w io.Writer, l deadletters.Listing) error {
	rows := make([]string, len(l.DeadLetters))
	for i, d := range l.DeadLetters {
		rows[i] = fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s", d.ID, d.OrderNo, cmp.Or(d.OrderTable, "-"), d.Stage, d.Status, d.Attempts,
			d.NextRetryAt.Format(letterTimeLayout), d.UpdatedAt.Format(letterTimeLayout), oneLine(letterWhy(d), 80))
	}
	return printListing(w, "dead letters", "ID\tORDER_NO\tTABLE\tSTAGE\tSTATUS\tATTEMPTS\tNEXT_RETRY_AT\tUPDATED_AT\tREASON / LAST_ERROR", rows, l.NextBefore)
}

// letterWhy is the most useful one-line explanation of a letter: the reason it is
// parked or resolved, else its last error.
func letterWhy(d deadletters.Letter) string {
	if d.StatusReason != "" {
		return d.StatusReason
	}
	return d.LastError
}

func printDeadLetter(w io.Writer, d *deadletters.Letter) error {
	return printFields(w, [][2]string{
		{"id", fmt.Sprint(d.ID)}, {"orderNo", d.OrderNo}, {"orderTable", d.OrderTable}, {"stage", d.Stage}, {"status", d.Status},
		{"statusReason", d.StatusReason}, {"attempts", fmt.Sprint(d.Attempts)},
		{"nextRetryAt", d.NextRetryAt.Format(letterTimeLayout)}, {"createdAt", d.CreatedAt.Format(letterTimeLayout)},
		{"updatedAt", d.UpdatedAt.Format(letterTimeLayout)}, {"lastError", oneLine(d.LastError, 2000)},
	})
}

// oneLetter runs an operation on one order's letter and prints the letter.
func oneLetter(ctx context.Context, dc *deadLetterCtx, orderNo, stage string,
	op func(ctx context.Context, orderNo, stage string) (*deadletters.Letter, error)) error {
	stage = cmp.Or(stage, deadletters.StageClose) // as the view takes -stage "" ("no  dead letter" before)
	// A resolved letter is shown, then the refusal.
	return runOne(ctx, dc, func(ctx context.Context) (*deadletters.Letter, error) { return op(ctx, orderNo, stage) },
		deadletters.ErrNotFound, fmt.Errorf("no %s dead letter for order %q", stage, orderNo), printDeadLetter)
}

func deadLetterShow(fs *flag.FlagSet, env *cliEnv) runFunc {
	dc := newViewCtx(fs, env, deadletters.New)
	stage := fs.String("stage", deadletters.StageClose, "the letter's stage")
	return func(ctx context.Context, pos []string) error {
		return oneLetter(ctx, dc, pos[0], *stage, func(ctx context.Context, no, stage string) (*deadletters.Letter, error) {
			return dc.view.Get(ctx, no, stage)
		})
	}
}

// deadLetterRequeue requeues one order's letter, or with -status every
// matching letter; the filters of the second form refuse an ORDERNO.
func deadLetterRequeue(fs *flag.FlagSet, env *cliEnv) runFunc {
	dc := newViewCtx(fs, env, deadletters.New)
	stage := fs.String("stage", deadletters.StageClose, "the letters' stage")
	status := fs.String("status", "", "instead of one ORDERNO, requeue every letter in this status: parked or waiting")
	errorLike := fs.String("error-like", "", "with -status: only letters whose last error contains TEXT (% and _ are wildcards)")
	since := fs.String("since", "", "with -status: only letters changed at or after TIME (2006-01-02 15:04:05, database wall clock) or DURATION ago (90m, 6h, 7d)")
	dryRun := fs.Bool("dry-run", false, "with -status: count the letters, move none")
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 1 {
			if bulk := setFlags(fs, "status", "error-like", "since", "dry-run"); len(bulk) > 0 {
				return usagef("ORDERNO and -%s do not go together: write `executor deadletter requeue %s` for that order's letter, "+
					"or `executor deadletter requeue %s` for every matching letter", bulk[0], pos[0], strings.Join(bulkArgs(fs, bulk), " "))
			}
			return oneLetter(ctx, dc, pos[0], *stage, func(ctx context.Context, no, stage string) (*deadletters.Letter, error) {
				return dc.view.Requeue(ctx, no, stage)
			})
		}
		if *status == "" {
			return usagef("want an ORDERNO, or -status parked|waiting to requeue every matching letter")
		}
		f := deadletters.RequeueFilter{Status: strings.ToLower(*status), Stage: *stage, ErrorLike: *errorLike, DryRun: *dryRun}
		var err error
		if f.Since, f.SinceAgo, err = deadletters.ParseSince(*since); err != nil {
			return usagef("-%v", err)
		}
		return requeueMatching(ctx, dc, f)
	}
}

func requeueMatching(ctx context.Context, dc *deadLetterCtx, f deadletters.RequeueFilter) error {
	return runView(ctx, dc, func(ctx context.Context) (deadletters.RequeueResult, error) {
		return dc.view.RequeueMatching(ctx, f)
	}, func(w io.Writer, res deadletters.RequeueResult) error {
		_, err := fmt.Fprintln(w, res.String())
		return err
	})
}

// setFlags is those of names that the command line set, in names' order.
func setFlags(fs *flag.FlagSet, names ...string) []string {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var out []string
	for _, n := range names {
		if set[n] {
			out = append(out, n)
		}
	}
	return out
}

// bulkArgs writes the named flags back as command-line arguments.
func bulkArgs(fs *flag.FlagSet, names []string) []string {
	var out []string
	for _, n := range names {
		f := fs.Lookup(n)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			out = append(out, "-"+n)
			continue
		}
		out = append(out, "-"+n, f.Value.String())
	}
	return out
}

// flagName maps a filter field to its command-line flag: the views name
// their input as the API does (-type was named -eventType in the error).
func flagName(field string) string {
	switch field {
	case "errorLike":
		return "error-like"
	case "eventType":
		return "type"
	case "orderNo":
		return "order"
	}
	return field
}
