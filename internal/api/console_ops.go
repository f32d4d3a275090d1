package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
)

// The console's pages and actions over the outbox (parked events) and
// the refunds owed (payment conflicts) of an order source, through the
// same views the CLI and the JSON API use (outbox.Ops, refunds.Ops).

func (c *Console) outboxList(w http.ResponseWriter, r *http.Request, op *session) {
	q, v, after, err := c.sourcedListQuery(r, "status", "eventType", "orderNo", "after")
	var p outbox.Page
	if err == nil {
		p, err = v.outbox.Page(r.Context(), outbox.Query{Status: strings.ToLower(q.Get("status")), EventType: q.Get("eventType"),
			OrderNo: q.Get("orderNo"), After: after})
	}
	c.renderList(w, r, op, err, "outboxlist", pageData{Title: "Outbox events", Nav: "outbox", Sourced: true},
		listData{Filter: q, Rows: p.Events, Examined: p.Examined, WindowFull: p.WindowFull}, p.Next)
}

func (c *Console) outboxDetail(w http.ResponseWriter, r *http.Request, op *session) {
	_, id, ev, ok := outboxEvents.lookup(c, w, r, op)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "outboxevent", op, pageData{Title: "Outbox event " + strconv.FormatInt(id, 10), Nav: "outbox", Data: ev})
}

func (c *Console) outboxRequeue(w http.ResponseWriter, r *http.Request, op *session) {
	v, id, before, ok := outboxEvents.lookup(c, w, r, op)
	if !ok {
		return
	}
	back := outboxEvents.page(r, id)
	if !c.confirmedOr(w, r, op, confirmData{Action: inSource(r, fmt.Sprintf("requeue the %s event of order %s", before.EventType, before.OrderNo)),
		What: []string{fmt.Sprintf("status %s → pending, due now: the relays deliver it again", before.Status),
			fmt.Sprintf("attempts %d → 0; the last error is kept", before.Attempts)},
		Back: back}) {
		return
	}
	after, err := v.outbox.Requeue(r.Context(), id)
	c.audit(r, op, "requeue outbox event", before.OrderNo, err, append([]any{"outbox_id", id, "event_type", before.EventType}, logSource(r)...)...)
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	c.done(w, r, op, doneData{Action: fmt.Sprintf("requeued the %s event of order %s", after.EventType, after.OrderNo),
		Summary: "The event is pending and due now.", Back: back, BackTo: "the event",
		Changes: changes(
			change{"status", before.Status, after.Status},
			change{"attempts", strconv.Itoa(before.Attempts), strconv.Itoa(after.Attempts)},
			change{"park reason", before.ParkReason, after.ParkReason},
			change{"next attempt", utcText(before.NextAttemptAt), utcText(after.NextAttemptAt)})})
}

func (c *Console) refundList(w http.ResponseWriter, r *http.Request, op *session) {
	q, v, after, err := c.sourcedListQuery(r, "status", "orderNo", "after")
	var p refunds.Page
	if err == nil {
		p, err = v.refunds.Page(r.Context(), refunds.Query{Status: strings.ToLower(q.Get("status")), OrderNo: q.Get("orderNo"), After: after})
	}
	c.renderList(w, r, op, err, "refundlist", pageData{Title: "Refunds", Nav: "refunds", Sourced: true},
		listData{Filter: q, Rows: p.Conflicts, Examined: len(p.Conflicts)}, p.Next)
}

// payment reads the payment of the path's paymentId in the request's
// source; false when it answered that it could not.
func (c *Console) payment(w http.ResponseWriter, r *http.Request, op *session) (*orderViews, *refunds.Conflict, bool) {
	id := r.PathValue("paymentId")
	return lookupIn(c, w, r, op, "payment "+id, func(v *orderViews, ctx context.Context) (*refunds.Conflict, error) {
		return v.refunds.Get(ctx, id)
	})
}

func (c *Console) refundDetail(w http.ResponseWriter, r *http.Request, op *session) {
	_, p, ok := c.payment(w, r, op)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "refund", op, pageData{Title: "Payment " + p.PaymentID, Nav: "refunds", Data: p})
}

func (c *Console) refundMark(w http.ResponseWriter, r *http.Request, op *session) {
	v, before, ok := c.payment(w, r, op)
	if !ok {
		return
	}
	id := r.PathValue("paymentId")
	note := strings.TrimSpace(r.PostFormValue("note"))
	back := withSource(r, consolePath+"refunds/"+url.PathEscape(id))
	what := []string{fmt.Sprintf("payment %s of order %s (%s, %s): refund status %s → refunded", id, before.OrderNo,
		before.Amount, before.Reason, before.RefundStatus),
		fmt.Sprintf("recorded as done by %s, now", op.name)}
	if note != "" {
		what = append(what, "with the note: "+note)
	}
	if !c.confirmedOr(w, r, op, confirmData{Action: inSource(r, "record the refund of payment "+id), What: what,
		Fields: url.Values{"note": {note}}, Back: back}) {
		return
	}
	after, err := v.refunds.MarkRefunded(r.Context(), id, note, op.name)
	c.audit(r, op, "record refund", id, err, append([]any{"order_no", before.OrderNo, "amount", before.Amount}, logSource(r)...)...)
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	refundedAt := ""
	if after.RefundedAt != nil {
		refundedAt = wallText(*after.RefundedAt)
	}
	c.done(w, r, op, doneData{Action: "recorded the refund of payment " + id,
		Summary: fmt.Sprintf("Payment %s of order %s is refunded, recorded by %s.", id, after.OrderNo, after.RefundedBy),
		Back:    back, BackTo: "the payment",
		Changes: changes(
			change{"refund status", before.RefundStatus, after.RefundStatus},
			change{"refunded at", "", refundedAt},
			change{"refunded by", before.RefundedBy, after.RefundedBy},
			change{"note", before.RefundNote, after.RefundNote})})
}

// changes keeps the changes whose values differ.
func changes(all ...change) []change {
	var out []change
	for _, ch := range all {
		if ch.Before != ch.After {
			out = append(out, ch)
		}
	}
	return out
}
