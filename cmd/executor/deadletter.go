package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/oplist"
)

func init() {
	register(command{
		name:    "deadletter",
		usage:   "list|show|requeue [flags] [ORDERNO]",
		summary: "inspect and requeue dead letters (order_dead_letter); -json for machines",
		run:     cmdDeadLetter,
	})
}

// deadLetterSubcommands maps `executor deadletter X` to its function and
// one usage line.
var deadLetterSubcommands = map[string]subcommand[*deadLetterCtx]{
	"list": {"list [-status waiting|parked|resolved] [-stage S] [-limit N] [-before ID] [-json]", deadLetterList},
	"show": {"show ORDERNO [-stage S] [-json]", deadLetterShow},
	"requeue": {"requeue ORDERNO [-stage S] [-json]   (parked or waiting → waiting, due now)\n" +
		"             requeue -status parked|waiting [-error-like TEXT] [-since TIME|DURATION] [-stage S] [-dry-run] [-json]   (every matching letter)", deadLetterRequeue},
}

var deadLetterOrder = []string{"list", "show", "requeue"}

// deadLetterCtx is what every deadletter subcommand gets.
type deadLetterCtx = viewCtx[*deadletters.Ops]

func cmdDeadLetter(ctx context.Context, env *cliEnv, args []string) error {
	return dispatchSub(ctx, env, "deadletter", deadLetterSubcommands, deadLetterOrder,
		&deadLetterCtx{env: env, newView: deadletters.New, what: "ORDERNO"}, args)
}

// letterTimeLayout is the table layout of dead-letter times (the database session's
// wall clock).
const letterTimeLayout = "2006-01-02 15:04:05.000"

func deadLetterList(ctx context.Context, dc *deadLetterCtx, args []string) error {
	fs := newFlagSet(dc.env, "deadletter list")
	status := fs.String("status", "", "only this status: waiting, parked or resolved")
	stage := fs.String("stage", "", "only this stage (close, ...)")
	limit := fs.Int("limit", 50, fmt.Sprintf("most letters shown (1-%d)", oplist.MaxListLimit))
	before := fs.Int64("before", 0, "page: letters with id below this")
	if _, err := dc.parse(fs, args, 0); err != nil {
		return err
	}
	st := strings.ToLower(*status)
	if st != "" && !deadletters.ValidStatus(st) {
		return usagef("-status %q is not waiting, parked or resolved", *status)
	}
	if *limit < 1 || *limit > oplist.MaxListLimit {
		return usagef("-limit %d is not in 1..%d", *limit, oplist.MaxListLimit)
	}
	if *before < 0 {
		return usagef("-before %d is negative", *before)
	}
	closeDB, err := dc.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	dls, err := dc.view.List(ctx, deadletters.Filter{Status: st, Stage: *stage, Limit: *limit, BeforeID: *before})
	if err != nil {
		return err
	}
	var next int64
	if len(dls) == *limit {
		next = dls[len(dls)-1].ID
	}
	if dc.jsonOut {
		return printJSON(dc.env.stdout, deadletters.Listing{DeadLetters: dls, NextBefore: next})
	}
	w := tabwriter.NewWriter(dc.env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tORDER_NO\tSTAGE\tSTATUS\tATTEMPTS\tNEXT_RETRY_AT\tUPDATED_AT\tREASON / LAST_ERROR")
	for _, d := range dls {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.ID, d.OrderNo, d.Stage, d.Status, d.Attempts,
			d.NextRetryAt.Format(letterTimeLayout), d.UpdatedAt.Format(letterTimeLayout), oneLine(letterWhy(d), 80))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if next != 0 {
		fmt.Fprintf(dc.env.stdout, "(more: -before %d)\n", next)
	}
	return nil
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", fmt.Sprint(d.ID)}, {"orderNo", d.OrderNo}, {"stage", d.Stage}, {"status", d.Status},
		{"statusReason", d.StatusReason}, {"attempts", fmt.Sprint(d.Attempts)},
		{"nextRetryAt", d.NextRetryAt.Format(letterTimeLayout)}, {"createdAt", d.CreatedAt.Format(letterTimeLayout)},
		{"updatedAt", d.UpdatedAt.Format(letterTimeLayout)}, {"lastError", oneLine(d.LastError, 2000)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

// oneLetter runs a single-letter subcommand and prints the letter.
func oneLetter(ctx context.Context, dc *deadLetterCtx, name string, args []string,
	op func(ctx context.Context, orderNo, stage string) (*deadletters.Letter, error)) error {
	fs := newFlagSet(dc.env, "deadletter "+name)
	stage := fs.String("stage", deadletters.StageClose, "the letter's stage")
	pos, err := dc.parse(fs, args, 1)
	if err != nil {
		return err
	}
	closeDB, err := dc.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	d, err := op(ctx, pos[0], *stage)
	var inv *oplist.InvalidInputError
	switch {
	case errors.Is(err, deadletters.ErrNotFound):
		return fmt.Errorf("no %s dead letter for order %q", *stage, pos[0])
	case errors.As(err, &inv):
		return usagef("%s", inv.Msg)
	case err != nil && d == nil:
		return err
	}
	if dc.jsonOut {
		if perr := printJSON(dc.env.stdout, d); perr != nil {
			return perr
		}
	} else if perr := printDeadLetter(dc.env.stdout, d); perr != nil {
		return perr
	}
	return err // a resolved letter is shown, then the refusal
}

func deadLetterShow(ctx context.Context, dc *deadLetterCtx, args []string) error {
	return oneLetter(ctx, dc, "show", args, func(ctx context.Context, no, stage string) (*deadletters.Letter, error) {
		return dc.view.Get(ctx, no, stage)
	})
}

func deadLetterRequeue(ctx context.Context, dc *deadLetterCtx, args []string) error {
	if !hasFlag(args, "status") {
		return oneLetter(ctx, dc, "requeue", args, func(ctx context.Context, no, stage string) (*deadletters.Letter, error) {
			return dc.view.Requeue(ctx, no, stage)
		})
	}
	fs := newFlagSet(dc.env, "deadletter requeue")
	status := fs.String("status", "", "requeue every letter in this status: parked or waiting")
	stage := fs.String("stage", deadletters.StageClose, "the letters' stage")
	errorLike := fs.String("error-like", "", "only letters whose last error contains TEXT (% and _ are wildcards)")
	since := fs.String("since", "", "only letters changed at or after TIME (2006-01-02 15:04:05, database wall clock) or DURATION ago (90m, 6h, 7d)")
	dryRun := fs.Bool("dry-run", false, "count the letters, move none")
	if _, err := dc.parse(fs, args, 0); err != nil {
		return err
	}
	f := deadletters.RequeueFilter{Status: strings.ToLower(*status), Stage: *stage, ErrorLike: *errorLike, DryRun: *dryRun}
	var err error
	if f.Since, f.SinceAgo, err = deadletters.ParseSince(*since); err != nil {
		return usagef("-%v", err)
	}
	closeDB, err := dc.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	res, err := dc.view.RequeueMatching(ctx, f)
	var inv *oplist.InvalidInputError
	if errors.As(err, &inv) {
		return usagef("-%s: %s", flagName(inv.Field), inv.Msg)
	}
	if err != nil {
		return err
	}
	if dc.jsonOut {
		return printJSON(dc.env.stdout, res)
	}
	_, err = fmt.Fprintln(dc.env.stdout, res.String())
	return err
}

// hasFlag reports whether args set -name (or --name), with or without =.
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// flagName maps a filter field to its command-line flag.
func flagName(field string) string {
	if field == "errorLike" {
		return "error-like"
	}
	return field
}
