package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderjob/executor/orders/outbox"
)

func outboxCommand() *command {
	return &command{name: "outbox", summary: "outbox events (order_outbox): backlog, parked events, requeue; -json for machines",
		sub: []*command{
			{name: "stats", summary: "pending, oldest pending age, parked", flags: viewVerb(outbox.NewOps, outboxStats)},
			{name: "list", summary: "list events, newest first", flags: outboxList},
			{name: "show", args: "ID", summary: "show one event", flags: viewVerb(outbox.NewOps, outboxShow)},
			{name: "requeue", args: "[ID]", summary: "parked → pending, due now, attempts from zero: one event, or -all", flags: outboxRequeue},
		}}
}

// outboxCtx is what every outbox verb gets.
type outboxCtx = viewCtx[*outbox.Ops]

func outboxStats(ctx context.Context, oc *outboxCtx, _ []string) error {
	return runView(ctx, oc, func(ctx context.Context) (outbox.Stats, error) { return oc.view.Stats(ctx) }, printOutboxStats)
}

// printOutboxStats writes the backlog as a table.
func printOutboxStats(w io.Writer, s outbox.Stats) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "pending\t%d\n", s.Pending)
	fmt.Fprintf(tw, "oldest pending\t%s\n", (time.Duration(s.OldestPendingAgeSeconds * float64(time.Second))).Round(time.Second))
	fmt.Fprintf(tw, "parked\t%d\n", s.Parked)
	return tw.Flush()
}

func outboxList(fs *flag.FlagSet, env *cliEnv) runFunc {
	oc := newViewCtx(fs, env, outbox.NewOps)
	lf := addListFlags(fs, "events", "pending, parked or done")
	typ := fs.String("type", "", "only this event type: stock.release or coupon.restore")
	order := fs.String("order", "", "only this order's events")
	return func(ctx context.Context, _ []string) error {
		if err := lf.check(); err != nil {
			return err
		}
		return listOutbox(ctx, oc, outbox.Filter{Status: strings.ToLower(*lf.status), EventType: *typ, OrderNo: *order,
			Limit: *lf.limit, BeforeID: *lf.before})
	}
}

func listOutbox(ctx context.Context, oc *outboxCtx, f outbox.Filter) error {
	return runView(ctx, oc, func(ctx context.Context) (outbox.List, error) { return oc.view.List(ctx, f) }, printOutboxList)
}

// printOutboxList writes a page of events as a table.
func printOutboxList(w io.Writer, l outbox.List) error {
	rows := make([]string, len(l.Events))
	for i, e := range l.Events {
		why := e.LastError
		if e.ParkReason != "" {
			why = e.ParkReason + ": " + e.LastError
		}
		rows[i] = fmt.Sprintf("%d\t%s\t%s\t%s\t%d\t%s\t%s", e.ID, e.OrderNo, e.EventType, e.Status, e.Attempts,
			e.NextAttemptAt.Format(letterTimeLayout), oneLine(why, 80))
	}
	return printListing(w, "outbox events", "ID\tORDER_NO\tTYPE\tSTATUS\tATTEMPTS\tNEXT/PARKED/DONE (UTC)\tWHY / LAST_ERROR", rows, l.NextBefore)
}

func printOutboxEvent(w io.Writer, e *outbox.Event) error {
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(letterTimeLayout)
	}
	return printFields(w, [][2]string{
		{"id", fmt.Sprint(e.ID)}, {"orderNo", e.OrderNo}, {"eventType", e.EventType}, {"status", e.Status},
		{"attempts", fmt.Sprint(e.Attempts)}, {"nextAttemptAt (UTC)", e.NextAttemptAt.Format(letterTimeLayout)},
		{"parkReason", e.ParkReason}, {"parkedAt (UTC)", when(e.ParkedAt)}, {"createdAt (UTC)", e.CreatedAt.Format(letterTimeLayout)},
		{"deliveredAt (UTC)", when(e.DeliveredAt)}, {"traceId", e.TraceID}, {"lastError", oneLine(e.LastError, 2000)},
		{"payload", string(e.Payload)},
	})
}

func outboxShow(ctx context.Context, oc *outboxCtx, pos []string) error {
	id, err := eventID(pos[0])
	if err != nil {
		return err
	}
	return oneEvent(ctx, oc, id, func(ctx context.Context, id int64) (*outbox.Event, error) { return oc.view.Get(ctx, id) })
}

// eventID reads an event's ID from the command line.
func eventID(arg string) (int64, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id < 1 {
		return 0, usagef("ID %s is not a positive integer", quoteArg(arg))
	}
	return id, nil
}

// oneEvent runs op on event id and prints the event; an event op refuses
// (one not parked, for a requeue) is shown, then the refusal.
func oneEvent(ctx context.Context, oc *outboxCtx, id int64, op func(context.Context, int64) (*outbox.Event, error)) error {
	return runOne(ctx, oc, func(ctx context.Context) (*outbox.Event, error) { return op(ctx, id) },
		outbox.ErrNotFound, fmt.Errorf("no outbox event %d", id), printOutboxEvent)
}

func outboxRequeue(fs *flag.FlagSet, env *cliEnv) runFunc {
	oc := newViewCtx(fs, env, outbox.NewOps)
	all := fs.Bool("all", false, "instead of one ID, every parked event (of -type, when given)")
	typ := fs.String("type", "", "with -all: only this event type")
	return func(ctx context.Context, pos []string) error { return requeueOutbox(ctx, oc, pos, *all, *typ) }
}

func requeueOutbox(ctx context.Context, oc *outboxCtx, pos []string, all bool, typ string) error {
	switch {
	case all && len(pos) > 0:
		return usagef("-all takes no ID")
	case !all && len(pos) != 1:
		return usagef("want exactly one ID, or -all")
	case typ != "" && !all:
		return usagef("-type goes with -all")
	}
	if all {
		return requeueParked(ctx, oc, typ)
	}
	// The ID is read once the database is open: a command that cannot open
	// it says that first, whatever its ID.
	id, idErr := eventID(pos[0])
	return oneEvent(ctx, oc, id, func(ctx context.Context, id int64) (*outbox.Event, error) {
		if idErr != nil {
			return nil, idErr
		}
		return oc.view.Requeue(ctx, id)
	})
}

// requeueParked requeues every parked event (of typ, when not "") and
// says how many. A -type the view refuses is bad usage, as in list.
func requeueParked(ctx context.Context, oc *outboxCtx, typ string) error {
	return runView(ctx, oc, func(ctx context.Context) (outbox.RequeueResult, error) {
		n, err := oc.view.RequeueParked(ctx, typ)
		return outbox.RequeueResult{Requeued: n}, err
	}, func(w io.Writer, r outbox.RequeueResult) error {
		_, err := fmt.Fprintf(w, "requeued %d parked event(s)\n", r.Requeued)
		return err
	})
}
