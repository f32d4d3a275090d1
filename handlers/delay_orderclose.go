package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders"
)

// This file adapts the order close to delayed tasks (delay.OrderTimeoutClose
// registrations, handler delay.OrderTimeoutCloseHandler), as the rest of the
// package adapts it to XXL-JOB runs.

// DelayOrderClose adapts the order-close entry point (orders.Closer's
// CloseOrder) to a delay.HandlerFunc:
//
//	handlers := map[string]delay.HandlerFunc{
//		delay.OrderTimeoutCloseHandler: handlers.DelayOrderClose(closer.CloseOrder),
//	}
//
// CloseOrder takes the order's lock and closes it with a status CAS, so a
// task that runs twice (recovered after its dispatcher died) closes the
// order once. Outcomes:
//
//	closed, skipped_paid, skipped_closed   success (DONE), counted by name
//	skipped_locked                         not now (NotNow): lock held elsewhere,
//	                                       Redis unreachable, payment side failing
//	not_due                                moved to the order's deadline (NotDue)
//	                                       when the outcome tells it (the batch
//	                                       handler's orders.Result), else not now
//	dead_lettered                          a failure: retry with backoff
//	not_found, parked                      FAILED at once (an operator's case)
//
// An error with no outcome (the database unreachable, a statement that
// failed for a reason that is not the order's) is "not now" too.
func DelayOrderClose(closeOrder func(ctx context.Context, orderNo string) (orders.Outcome, error)) delay.HandlerFunc {
	return func(ctx context.Context, t *delay.Task) error {
		no, err := orderPayload(t)
		if err != nil {
			return err
		}
		o, err := closeOrder(ctx, no)
		delay.Logger(ctx).DebugContext(ctx, "order close attempted", "order_no", no, "outcome", o.String(), "err", err)
		if err != nil {
			if o == orders.OutcomeDeadLettered {
				return fmt.Errorf("close order %s (%s): %w", no, o, err)
			}
			return delay.NotNow(fmt.Errorf("close order %s (%s): %w", no, o, err))
		}
		return orderTaskResult(ctx, no, orders.Result{Outcome: o}, false)
	}
}

// orderPayload reads an orderTimeoutClose task's order number.
func orderPayload(t *delay.Task) (string, error) {
	p, err := parseOrderPayload(t.Payload)
	if err != nil {
		return "", delay.Permanent(err)
	}
	return p.OrderNo, nil
}

// maxOrderNoChars is order_info.order_no's length, VARCHAR(64); a table
// name is at most as long (MySQL's identifiers).
const maxOrderNoChars = 64

// ValidateOrderPayload checks an orderTimeoutClose task's payload at
// registration (delay.Config.PayloadValidators), so a task without an
// order is refused instead of failing when it runs: a JSON object whose
// "orderNo" is a string of 1 to 64 characters, and whose "table", when
// present, is one too. Other keys are ignored. OrderCloseTables.Validate
// also checks that the table is one the database holds.
func ValidateOrderPayload(payload json.RawMessage) error {
	_, err := parseOrderPayload(payload)
	return err
}

// parseOrderPayload reads an orderTimeoutClose payload; its errors are
// *delay.InvalidError naming the field.
func parseOrderPayload(payload json.RawMessage) (delay.OrderTimeoutPayload, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(payload, &p); err != nil || p == nil {
		return delay.OrderTimeoutPayload{}, &delay.InvalidError{Field: "payload", Msg: `must be a JSON object {"orderNo": "..."}, not ` + clipJSON(payload)}
	}
	raw, ok := p["orderNo"]
	if !ok {
		return delay.OrderTimeoutPayload{}, &delay.InvalidError{Field: "payload.orderNo", Msg: "is required (the order to close)"}
	}
	no, err := payloadString("payload.orderNo", "order_info.order_no", raw)
	if err != nil {
		return delay.OrderTimeoutPayload{}, err
	}
	out := delay.OrderTimeoutPayload{OrderNo: no}
	if raw, ok := p["table"]; ok {
		if out.Table, err = payloadString("payload.table", "a table name", raw); err != nil {
			return delay.OrderTimeoutPayload{}, err
		}
	}
	return out, nil
}

// payloadString reads the payload's field (its name in errors) as a
// string of 1 to maxOrderNoChars characters, the length of what (for
// errors).
func payloadString(field, what string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || string(bytes.TrimSpace(raw)) == "null" {
		return "", &delay.InvalidError{Field: field, Msg: "must be a string, not " + clipJSON(raw)}
	}
	switch n := utf8.RuneCountInString(s); {
	case strings.TrimSpace(s) == "":
		return "", &delay.InvalidError{Field: field, Msg: "is empty"}
	case n > maxOrderNoChars:
		return "", &delay.InvalidError{Field: field, Msg: fmt.Sprintf("is %d characters, at most %d (%s)", n, maxOrderNoChars, what)}
	}
	return s, nil
}

// clipJSON is a JSON value for a message, at most 40 bytes of it.
func clipJSON(b []byte) string {
	if len(b) > 40 {
		return string(bytes.ToValidUTF8(b[:40], nil)) + "..."
	}
	return string(b)
}

// orderTaskResult maps an order's outcome to its task's result (see
// DelayOrderClose), reporting the successful ones on ctx. knowsDue says
// whether r.DueIn is the order's time left (CloseOrders tells it,
// CloseOrder does not); r.Err says why an order was skipped or
// dead-lettered.
func orderTaskResult(ctx context.Context, orderNo string, r orders.Result, knowsDue bool) error {
	switch r.Outcome {
	case orders.OutcomeClosed, orders.OutcomeSkippedPaid, orders.OutcomeSkippedClosed:
		delay.ReportOutcome(ctx, r.Outcome.String())
		return nil
	case orders.OutcomeNotDue:
		err := fmt.Errorf("order %s is not due yet (its deadline is later than the task's execute time)", orderNo)
		if knowsDue {
			return delay.NotDue(err, r.DueIn)
		}
		return delay.NotNow(err)
	case orders.OutcomeSkippedLocked:
		if r.Err != nil {
			return delay.NotNow(fmt.Errorf("order %s could not be locked or closed now: %w", orderNo, r.Err))
		}
		return delay.NotNow(fmt.Errorf("order %s is locked by another close or a payment", orderNo))
	case orders.OutcomeNotFound:
		return delay.Permanent(fmt.Errorf("order %s not found", orderNo))
	case orders.OutcomeParked:
		return delay.Permanent(fmt.Errorf("order %s: its close is parked in order_dead_letter", orderNo))
	case orders.OutcomeDeadLettered:
		if r.Err != nil {
			return fmt.Errorf("close order %s failed and was dead-lettered: %w", orderNo, r.Err)
		}
		return fmt.Errorf("close order %s failed and was dead-lettered (order_dead_letter.last_error has the cause)", orderNo)
	}
	return fmt.Errorf("close order %s: outcome %s", orderNo, r.Outcome)
}

// orderTasksKey keys, in the context DelayOrderCloseBatch gives
// closeOrders, each order number's task.
type orderTasksKey struct{}

// DelayOrderContexts returns, for the context DelayOrderCloseBatch gives
// closeOrders, a function from an order number to the context of the task
// that asked to close it (delay.ForTask: its trace id and logger), or to
// ctx for other numbers and outside such a call. Pass it to
// orders.WithOrderContexts so that the closer's lines about an order carry
// its task's trace id:
//
//	handlers.DelayOrderCloseBatch(func(ctx context.Context, nos []string) ([]orders.Result, error) {
//		return closer.CloseOrders(orders.WithOrderContexts(ctx, handlers.DelayOrderContexts(ctx)), nos)
//	})
func DelayOrderContexts(ctx context.Context) func(orderNo string) context.Context {
	byNo, _ := ctx.Value(orderTasksKey{}).(map[string]*delay.Task)
	return func(orderNo string) context.Context {
		if t := byNo[orderNo]; t != nil {
			return delay.ForTask(ctx, t)
		}
		return ctx
	}
}

// DelayOrderCloseBatch adapts the batch order-close entry point
// (orders.Closer's CloseOrders) to a delay.BatchHandlerFunc, which the
// dispatcher calls with the claimed orderTimeoutClose tasks together:
//
//	batchHandlers := map[string]delay.BatchHandlerFunc{
//		delay.OrderTimeoutCloseHandler: handlers.DelayOrderCloseBatch(closer.CloseOrders),
//	}
//
// closeOrders gets the tasks' order numbers in task order and returns one
// result per number (which tells a not-due order's time left and a skip's
// cause), or an error for the whole batch, which is about no one task (the
// database unreachable, a statement that failed for a reason that is not
// an order's): every task of the call is then "not now" (delay.NotNow). Its
// context is the batch's (its trace id is the batch's);
// DelayOrderContexts maps an order number to its task's. Each task's
// outcome is mapped as DelayOrderClose maps CloseOrder's; a task whose
// payload does not parse FAILS without being sent. Closing many orders at
// once takes one lock pipeline and one transaction instead of one each,
// which is what lets a dispatcher keep up with a thousand orders coming due
// per second.
func DelayOrderCloseBatch(closeOrders func(ctx context.Context, orderNos []string) ([]orders.Result, error)) delay.BatchHandlerFunc {
	return func(ctx context.Context, tasks []*delay.Task) []error {
		errs := make([]error, len(tasks))
		nos := make([]string, 0, len(tasks))
		idx := make([]int, 0, len(tasks)) // task index of each order number
		for i, t := range tasks {
			no, err := orderPayload(t)
			if err != nil {
				errs[i] = err
				continue
			}
			nos = append(nos, no)
			idx = append(idx, i)
		}
		if len(nos) == 0 {
			return errs
		}
		byNo := make(map[string]*delay.Task, len(nos))
		for k, i := range idx {
			if _, dup := byNo[nos[k]]; !dup {
				byNo[nos[k]] = tasks[i]
			}
		}
		outs, err := closeOrders(context.WithValue(ctx, orderTasksKey{}, byNo), nos)
		if err == nil && len(outs) != len(nos) {
			err = fmt.Errorf("%d outcomes for %d orders", len(outs), len(nos))
		}
		if err != nil {
			delay.Logger(ctx).WarnContext(ctx, "batch order close failed; its tasks try again later", "num_orders", len(nos), "err", err)
		}
		for k, i := range idx {
			tctx := delay.ForTask(ctx, tasks[i])
			if err != nil {
				errs[i] = delay.NotNow(fmt.Errorf("close order %s (batch of %d): %w", nos[k], len(nos), err))
				continue
			}
			delay.Logger(tctx).DebugContext(tctx, "order close attempted", "order_no", nos[k], "outcome", outs[k].String(), "batch_size", len(nos))
			errs[i] = orderTaskResult(tctx, nos[k], outs[k], true)
		}
		return errs
	}
}
