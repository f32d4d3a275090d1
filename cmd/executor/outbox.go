package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/oplist"
)

func init() {
	register(command{
		name:    "outbox",
		usage:   "stats|list|show|requeue [flags] [ID]",
		summary: "outbox events (order_outbox): backlog, parked events, requeue; -json for machines",
		run:     cmdOutbox,
	})
}

var outboxSubcommands = map[string]subcommand[*outboxCtx]{
	"stats":   {"stats [-json]   (pending, oldest pending age, parked)", outboxStats},
	"list":    {"list [-status pending|parked|done] [-type T] [-order ORDERNO] [-limit N] [-before ID] [-json]", outboxList},
	"show":    {"show ID [-json]", outboxShow},
	"requeue": {"requeue ID | -all [-type T] [-json]   (parked → pending, due now, attempts from zero)", outboxRequeue},
}

var outboxOrder = []string{"stats", "list", "show", "requeue"}

// outboxCtx is what every outbox verb gets.
type outboxCtx = viewCtx[*orders.Outbox]

func cmdOutbox(ctx context.Context, env *cliEnv, args []string) error {
	return dispatchSub(ctx, env, "outbox", outboxSubcommands, outboxOrder,
		&outboxCtx{env: env, newView: orders.NewOutbox, what: "ID"}, args)
}

func outboxStats(ctx context.Context, oc *outboxCtx, args []string) error {
	if _, err := oc.parse(newFlagSet(oc.env, "outbox stats"), args, 0); err != nil {
		return err
	}
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

func outboxList(ctx context.Context, oc *outboxCtx, args []string) error {
	fs := newFlagSet(oc.env, "outbox list")
	status := fs.String("status", "", "only this status: pending, parked or done")
	typ := fs.String("type", "", "only this event type: stock.release or coupon.restore")
	order := fs.String("order", "", "only this order's events")
	limit := fs.Int("limit", 50, fmt.Sprintf("most events shown (1-%d)", oplist.MaxListLimit))
	before := fs.Int64("before", 0, "page: events with id below this")
	if _, err := oc.parse(fs, args, 0); err != nil {
		return err
	}
	closeDB, err := oc.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	l, err := oc.view.List(ctx, orders.OutboxFilter{Status: strings.ToLower(*status), EventType: *typ, OrderNo: *order,
		Limit: *limit, BeforeID: *before})
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
	w := tabwriter.NewWriter(oc.env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tORDER_NO\tTYPE\tSTATUS\tATTEMPTS\tNEXT/PARKED/DONE (UTC)\tWHY / LAST_ERROR")
	for _, e := range l.Events {
		why := e.LastError
		if e.ParkReason != "" {
			why = e.ParkReason + ": " + e.LastError
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", e.ID, e.OrderNo, e.EventType, e.Status, e.Attempts,
			e.NextAttemptAt.Format(letterTimeLayout), oneLine(why, 80))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if l.NextBefore != 0 {
		fmt.Fprintf(oc.env.stdout, "(more: -before %d)\n", l.NextBefore)
	}
	return nil
}

func printOutboxEvent(oc *outboxCtx, e *orders.OutboxEvent) error {
	if oc.jsonOut {
		return printJSON(oc.env.stdout, e)
	}
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(letterTimeLayout)
	}
	tw := tabwriter.NewWriter(oc.env.stdout, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", fmt.Sprint(e.ID)}, {"orderNo", e.OrderNo}, {"eventType", e.EventType}, {"status", e.Status},
		{"attempts", fmt.Sprint(e.Attempts)}, {"nextAttemptAt (UTC)", e.NextAttemptAt.Format(letterTimeLayout)},
		{"parkReason", e.ParkReason}, {"parkedAt (UTC)", when(e.ParkedAt)}, {"createdAt (UTC)", e.CreatedAt.Format(letterTimeLayout)},
		{"deliveredAt (UTC)", when(e.DeliveredAt)}, {"traceId", e.TraceID}, {"lastError", oneLine(e.LastError, 2000)},
		{"payload", string(e.Payload)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

func outboxShow(ctx context.Context, oc *outboxCtx, args []string) error {
	pos, err := oc.parse(newFlagSet(oc.env, "outbox show"), args, 1)
	if err != nil {
		return err
	}
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
	if errors.Is(err, orders.ErrOutboxEventNotFound) {
		return fmt.Errorf("no outbox event %d", id)
	}
	if err != nil {
		return err
	}
	return printOutboxEvent(oc, e)
}

func outboxRequeue(ctx context.Context, oc *outboxCtx, args []string) error {
	fs := newFlagSet(oc.env, "outbox requeue")
	all := fs.Bool("all", false, "every parked event (of -type, when given)")
	typ := fs.String("type", "", "with -all: only this event type")
	fs.BoolVar(&oc.jsonOut, "json", false, "print JSON instead of a table")
	pos, err := parseInterleaved(fs, args)
	switch {
	case err != nil:
		return err
	case *all && len(pos) > 0:
		return usagef("-all takes no ID")
	case !*all && len(pos) != 1:
		return usagef("want exactly one ID, or -all")
	case *typ != "" && !*all:
		return usagef("-type goes with -all")
	}
	closeDB, err := oc.open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	if *all {
		n, err := oc.view.RequeueParked(ctx, *typ)
		if err != nil {
			return err
		}
		if oc.jsonOut {
			return printJSON(oc.env.stdout, orders.OutboxRequeueResult{Requeued: n})
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
	case errors.Is(err, orders.ErrOutboxEventNotFound):
		return fmt.Errorf("no outbox event %d", id)
	case err != nil && e == nil:
		return err
	}
	if perr := printOutboxEvent(oc, e); perr != nil {
		return perr
	}
	return err // an event that is not parked is shown, then the refusal
}
