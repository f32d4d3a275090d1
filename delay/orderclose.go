package delay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// OrderTimeoutCloseHandler is the in-process handler that closes one unpaid
// order whose payment timeout has passed.
const OrderTimeoutCloseHandler = "orderTimeoutClose"

// OrderTimeoutPayload is the payload of an orderTimeoutClose task.
type OrderTimeoutPayload struct {
	OrderNo string `json:"orderNo"`
}

// OrderTimeoutClose registers the order with number orderNo to be closed at
// deadline (its create_time plus its timeout, as the order service stored
// them): bizUuid "order-timeout-{orderNo}".
func OrderTimeoutClose(orderNo string, deadline time.Time) Registration {
	return Registration{
		BizUUID:     "order-timeout-" + orderNo,
		Handler:     OrderTimeoutCloseHandler,
		ExecuteTime: deadline,
		Payload:     OrderTimeoutPayload{OrderNo: orderNo},
	}
}

// OrderCloseHandler adapts the order-close entry point (orders.Closer's
// CloseOrder, passed as a method value, so this package does not import
// orders) to a HandlerFunc:
//
//	handlers := map[string]delay.HandlerFunc{
//		delay.OrderTimeoutCloseHandler: delay.OrderCloseHandler(closer.CloseOrder),
//	}
//
// CloseOrder takes the order's lock and closes it with a status CAS, so a
// task that runs twice (recovered after its dispatcher died) closes the
// order once. Outcomes, by their String names:
//
//	closed, skipped_paid, skipped_closed   success (DONE), counted by name
//	skipped_locked                         not now (NotNow): lock held elsewhere,
//	                                       Redis unreachable, payment side failing
//	not_due                                moved to the order's deadline (NotDue)
//	                                       when the outcome tells it (UntilDue), else not now
//	dead_lettered                          a failure: retry with backoff
//	not_found, parked                      FAILED at once (an operator's case)
//
// An error with no outcome (the database unreachable, a statement that
// failed for a reason that is not the order's) is "not now" too.
func OrderCloseHandler[O fmt.Stringer](closeOrder func(ctx context.Context, orderNo string) (O, error)) HandlerFunc {
	return func(ctx context.Context, t *Task) error {
		no, err := orderPayload(t)
		if err != nil {
			return err
		}
		o, err := closeOrder(ctx, no)
		name := o.String()
		Logger(ctx).DebugContext(ctx, "order close attempted", "order_no", no, "outcome", name, "err", err)
		if err != nil {
			if name == "dead_lettered" {
				return fmt.Errorf("close order %s (%s): %w", no, name, err)
			}
			return NotNow(fmt.Errorf("close order %s (%s): %w", no, name, err))
		}
		return orderCloseResult(ctx, no, o)
	}
}

// orderPayload reads an orderTimeoutClose task's order number.
func orderPayload(t *Task) (string, error) {
	var p OrderTimeoutPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return "", Permanent(fmt.Errorf("payload is not {\"orderNo\": \"...\"}: %w", err))
	}
	if p.OrderNo == "" {
		return "", Permanent(errors.New(`payload has no "orderNo"`))
	}
	return p.OrderNo, nil
}

// orderCloseResult maps an order's outcome to its task's result (see
// OrderCloseHandler), reporting the successful ones on ctx. An outcome may
// tell how long the order has until its deadline (UntilDue() time.Duration,
// for not_due) and why it was skipped or dead-lettered (Cause() error), as
// orders.Result does.
func orderCloseResult[O fmt.Stringer](ctx context.Context, orderNo string, o O) error {
	name := o.String()
	var cause error
	if c, ok := any(o).(interface{ Cause() error }); ok {
		cause = c.Cause()
	}
	switch name {
	case "closed", "skipped_paid", "skipped_closed":
		ReportOutcome(ctx, name)
		return nil
	case "not_due":
		err := fmt.Errorf("order %s is not due yet (its deadline is later than the task's execute time)", orderNo)
		if d, ok := any(o).(interface{ UntilDue() time.Duration }); ok {
			return NotDue(err, d.UntilDue())
		}
		return NotNow(err)
	case "skipped_locked":
		if cause != nil {
			return NotNow(fmt.Errorf("order %s could not be locked or closed now: %w", orderNo, cause))
		}
		return NotNow(fmt.Errorf("order %s is locked by another close or a payment", orderNo))
	case "not_found":
		return Permanent(fmt.Errorf("order %s not found", orderNo))
	case "parked":
		return Permanent(fmt.Errorf("order %s: its close is parked in order_dead_letter", orderNo))
	case "dead_lettered":
		if cause != nil {
			return fmt.Errorf("close order %s failed and was dead-lettered: %w", orderNo, cause)
		}
		return fmt.Errorf("close order %s failed and was dead-lettered (order_dead_letter.last_error has the cause)", orderNo)
	}
	return fmt.Errorf("close order %s: outcome %s", orderNo, name)
}

// orderTasksKey keys, in the context OrderCloseBatchHandler gives
// closeOrders, each order number's task.
type orderTasksKey struct{}

// OrderContexts returns, for the context OrderCloseBatchHandler gives
// closeOrders, a function from an order number to the context of the task
// that asked to close it (ForTask: its trace id and logger), or to ctx for
// other numbers and outside such a call. Pass it to
// orders.WithOrderContexts so that the closer's lines about an order carry
// its task's trace id:
//
//	delay.OrderCloseBatchHandler(func(ctx context.Context, nos []string) ([]orders.Result, error) {
//		return closer.CloseOrders(orders.WithOrderContexts(ctx, delay.OrderContexts(ctx)), nos)
//	})
func OrderContexts(ctx context.Context) func(orderNo string) context.Context {
	byNo, _ := ctx.Value(orderTasksKey{}).(map[string]*Task)
	return func(orderNo string) context.Context {
		if t := byNo[orderNo]; t != nil {
			return ForTask(ctx, t)
		}
		return ctx
	}
}

// OrderCloseBatchHandler adapts the batch order-close entry point
// (orders.Closer's CloseOrders, passed as a method value) to a
// BatchHandlerFunc, which the dispatcher calls with the claimed
// orderTimeoutClose tasks together:
//
//	batchHandlers := map[string]delay.BatchHandlerFunc{
//		delay.OrderTimeoutCloseHandler: delay.OrderCloseBatchHandler(closer.CloseOrders),
//	}
//
// closeOrders gets the tasks' order numbers in task order and returns one
// outcome per number (orders.Result, which tells a not-due order's time
// left and a skip's cause), or an error for the whole batch, which is
// about no one task (the database unreachable, a statement that failed for
// a reason that is not an order's): every task of the call is then "not
// now" (NotNow). Its context is the batch's (TraceID is the batch's trace
// id); OrderContexts maps an order number to its task's. Each task's
// outcome is mapped as OrderCloseHandler maps CloseOrder's; a task whose
// payload does not parse FAILS without being sent. Closing many orders at once takes one lock pipeline and one
// transaction instead of one each, which is what lets a dispatcher keep up
// with a thousand orders coming due per second.
func OrderCloseBatchHandler[O fmt.Stringer](closeOrders func(ctx context.Context, orderNos []string) ([]O, error)) BatchHandlerFunc {
	return func(ctx context.Context, tasks []*Task) []error {
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
		byNo := make(map[string]*Task, len(nos))
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
			Logger(ctx).WarnContext(ctx, "batch order close failed; its tasks try again later", "num_orders", len(nos), "err", err)
		}
		for k, i := range idx {
			tctx := ForTask(ctx, tasks[i])
			if err != nil {
				errs[i] = NotNow(fmt.Errorf("close order %s (batch of %d): %w", nos[k], len(nos), err))
				continue
			}
			Logger(tctx).DebugContext(tctx, "order close attempted", "order_no", nos[k], "outcome", outs[k].String(), "batch_size", len(nos))
			errs[i] = orderCloseResult(tctx, nos[k], outs[k])
		}
		return errs
	}
}
