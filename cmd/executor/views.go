package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/orders/oplist"
)

// viewCtx is what each verb of an operator command over one database view
// (deadletter, refunds, outbox) gets: the environment, the view, built when
// the verb opens the database, -json and -source (the order source whose
// database it reads, resolved into src when opened).
type viewCtx[V any] struct {
	env     *cliEnv
	newView func(*sqlx.DB) V
	view    V
	jsonOut bool
	source  string
	src     config.Source
}

// newViewCtx makes a verb's context and adds -json to its flags.
func newViewCtx[V any](fs *flag.FlagSet, env *cliEnv, newView func(*sqlx.DB) V) *viewCtx[V] {
	c := &viewCtx[V]{env: env, newView: newView}
	addJSON(fs, &c.jsonOut)
	addSourceFlag(fs, &c.source)
	return c
}

// viewVerb is the flags function of a verb with no flags but -json.
func viewVerb[V any](newView func(*sqlx.DB) V, run func(ctx context.Context, c *viewCtx[V], pos []string) error) func(*flag.FlagSet, *cliEnv) runFunc {
	return func(fs *flag.FlagSet, env *cliEnv) runFunc {
		c := newViewCtx(fs, env, newView)
		return func(ctx context.Context, pos []string) error { return run(ctx, c, pos) }
	}
}

// open loads the config and opens the database of -source (the views need
// no Redis) and builds the view; the function returned closes the database.
func (c *viewCtx[V]) open(ctx context.Context) (func(), error) {
	_, src, db, err := loadSourceDB(ctx, c.env, c.source)
	if err != nil {
		return nil, err
	}
	c.src = src
	c.view = c.newView(db)
	return func() { db.Close() }, nil
}

// cliView is what the verbs of the operator commands (deadletter,
// refunds, outbox, tasks) share: open what the verb reads, then print
// its result as a table or, with -json, as JSON.
type cliView interface {
	open(ctx context.Context) (func(), error)
	output() (w io.Writer, jsonOut bool)
}

func (c *viewCtx[V]) output() (io.Writer, bool) { return c.env.stdout, c.jsonOut }

// runView opens what c reads, runs get and prints its result: as JSON
// with -json, else with text. A filter the view refuses
// (*oplist.InvalidInputError) is a usage error naming its flag.
func runView[R any](ctx context.Context, c cliView, get func(context.Context) (R, error), text func(io.Writer, R) error) error {
	r, err := openRun(ctx, c, get)
	var inv *oplist.InvalidInputError
	if errors.As(err, &inv) {
		return usagef("-%s: %s", flagName(inv.Field), inv.Msg)
	}
	if err != nil {
		return err
	}
	return printResult(c, r, text)
}

// openRun opens what c reads, runs op and closes what it opened. A
// failure to open is returned as it is: it is never an
// *oplist.InvalidInputError nor a view's "not found".
func openRun[R any](ctx context.Context, c cliView, op func(context.Context) (R, error)) (R, error) {
	closeAll, err := c.open(ctx)
	if err != nil {
		var zero R
		return zero, err
	}
	defer closeAll()
	return op(ctx)
}

// printResult prints r as JSON with -json, else with text.
func printResult[R any](c cliView, r R, text func(io.Writer, R) error) error {
	w, jsonOut := c.output()
	if jsonOut {
		return printJSON(w, r)
	}
	return text(w, r)
}

// runOne opens what c reads, runs op on one row and prints the row as
// runView does. notFound is the error op gives for no such row, and
// missing what the command says then. An error that comes with a row (a
// change refused, e.g. of a resolved letter) is returned after the row is
// shown.
func runOne[R any](ctx context.Context, c cliView, op func(context.Context) (*R, error), notFound, missing error, text func(io.Writer, *R) error) error {
	r, err := openRun(ctx, c, op)
	var inv *oplist.InvalidInputError
	switch {
	case errors.Is(err, notFound):
		return missing
	case errors.As(err, &inv):
		return usagef("%s", inv.Msg)
	case err != nil && r == nil:
		return err
	}
	if perr := printResult(c, r, text); perr != nil {
		return perr
	}
	return err
}

// listFlags are the flags every list verb has: a status, a page size and
// the page's start.
type listFlags struct {
	status *string
	limit  *int
	before *int64
}

// addListFlags adds -status, -limit and -before to a list verb; noun names
// its rows ("letters"), statuses the statuses it accepts.
func addListFlags(fs *flag.FlagSet, noun, statuses string) listFlags {
	return listFlags{
		status: fs.String("status", "", "only this status: "+statuses+" (any case)"),
		limit:  fs.Int("limit", 50, fmt.Sprintf("most %s shown (1-%d)", noun, oplist.MaxListLimit)),
		before: fs.Int64("before", 0, "page: "+noun+" with id below this"),
	}
}

// check refuses a page size or start out of range.
func (l listFlags) check() error {
	if *l.limit < 1 || *l.limit > oplist.MaxListLimit {
		return usagef("-limit %d is not in 1..%d", *l.limit, oplist.MaxListLimit)
	}
	if *l.before < 0 {
		return usagef("-before %d is negative", *l.before)
	}
	return nil
}

// printListing writes a list verb's rows (tab-separated) under their
// header, or one line saying that none matched, then where the next page
// starts.
func printListing(w io.Writer, noun, header string, rows []string, next int64) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintf(w, "no %s match\n", noun)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != 0 {
		_, err := fmt.Fprintf(w, "(more: -before %d)\n", next)
		return err
	}
	return nil
}

// printFields writes one row of a show verb, a field a line.
func printFields(w io.Writer, fields [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, kv := range fields {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}
