package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderjob/executor/orders/oplist"
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
	closeDB, err := oc.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	s, err := oc.view.Stats(ctx)
	if err != nil {
		return err
	}
	if oc.jsonOut {
		return printJSON(oc.env.stdout, s)
	}
	tw := tabwriter.NewWriter(oc.env.stdout, 0, 4, 2, ' ', 0)
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
		return listOutbox(ctx, oc, outbox.Filter{Status: strings.ToLower(*lf.status), EventType: *typ, OrderNo: *order,
			Limit: *lf.limit, BeforeID: *lf.before})
	}
}

func listOutbox(ctx context.Context, oc *outboxCtx, f outbox.Filter) error {
	closeDB, err := oc.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	l, err := oc.view.List(ctx, f)
	var inv *oplist.InvalidInputError
	if errors.As(err, &inv) {
		return usagef("-%s: %s", inv.Field, inv.Msg)
	}
	if err != nil {
		return err
	}
	if oc.jsonOut {
		return printJSON(oc.env.stdout, l)
	}
	rows := make([]string, len(l.Events))
	for i, e := range l.Events {
		why := e.LastError
		if e.ParkReason != "" {
			why = e.ParkReason + ": " + e.LastError
		}
		rows[i] = fmt.Sprintf("%d\t%s\t%s\t%s\t%d\t%s\t%s", e.ID, e.OrderNo, e.EventType, e.Status, e.Attempts,
			e.NextAttemptAt.Format(letterTimeLayout), oneLine(why, 80))
	}
	return printListing(oc.env.stdout, "outbox events", "ID\tORDER_NO\tTYPE\tSTATUS\tATTEMPTS\tNEXT/PARKED/DONE (UTC)\tWHY / LAST_ERROR", rows, l.NextBefore)
}

func printOutboxEvent(oc *outboxCtx, e *outbox.Event) error {
	if oc.jsonOut {
		return printJSON(oc.env.stdout, e)
	}
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(letterTimeLayout)
	}
	return printFields(oc.env.stdout, [][2]string{
		{"id", fmt.Sprint(e.ID)}, {"orderNo", e.OrderNo}, {"eventType", e.EventType}, {"status", e.Status},
		{"attempts", fmt.Sprint(e.Attempts)}, {"nextAttemptAt (UTC)", e.NextAttemptAt.Format(letterTimeLayout)},
		{"parkReason", e.ParkReason}, {"parkedAt (UTC)", when(e.ParkedAt)}, {"createdAt (UTC)", e.CreatedAt.Format(letterTimeLayout)},
		{"deliveredAt (UTC)", when(e.DeliveredAt)}, {"traceId", e.TraceID}, {"lastError", oneLine(e.LastError, 2000)},
		{"payload", string(e.Payload)},
	})
}

func outboxShow(ctx context.Context, oc *outboxCtx, pos []string) error {
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id < 1 {
		return usagef("ID %q is not a positive integer", pos[0])
	}
	closeDB, err := oc.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	e, err := oc.view.Get(ctx, id)
	if errors.Is(err, outbox.ErrNotFound) {
		return fmt.Errorf("no outbox event %d", id)
	}
	if err != nil {
		return err
	}
	return printOutboxEvent(oc, e)
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
	closeDB, err := oc.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	if all {
		n, err := oc.view.RequeueParked(ctx, typ)
		if err != nil {
			return err
		}
		if oc.jsonOut {
			return printJSON(oc.env.stdout, outbox.RequeueResult{Requeued: n})
		}
		fmt.Fprintf(oc.env.stdout, "requeued %d parked event(s)\n", n)
		return nil
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id < 1 {
		return usagef("ID %q is not a positive integer", pos[0])
	}
	e, err := oc.view.Requeue(ctx, id)
	switch {
	case errors.Is(err, outbox.ErrNotFound):
		return fmt.Errorf("no outbox event %d", id)
	case err != nil && e == nil:
		return err
	}
	if perr := printOutboxEvent(oc, e); perr != nil {
		return perr
	}
	return err // an event that is not parked is shown, then the refusal
}
