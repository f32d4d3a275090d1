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
//	not_due, skipped_locked, dead_lettered retry with backoff
//	not_found, parked                      FAILED at once (an operator's case)
//	an error                               retry with backoff
func OrderCloseHandler[O fmt.Stringer](closeOrder func(ctx context.Context, orderNo string) (O, error)) HandlerFunc {
	return func(ctx context.Context, t *Task) error {
		var p OrderTimeoutPayload
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return Permanent(fmt.Errorf("payload is not {\"orderNo\": \"...\"}: %w", err))
		}
		if p.OrderNo == "" {
			return Permanent(errors.New(`payload has no "orderNo"`))
		}
		o, err := closeOrder(ctx, p.OrderNo)
		name := o.String()
		Logger(ctx).DebugContext(ctx, "order close attempted", "order_no", p.OrderNo, "outcome", name, "err", err)
		if err != nil {
			return fmt.Errorf("close order %s (%s): %w", p.OrderNo, name, err)
		}
		switch name {
		case "closed", "skipped_paid", "skipped_closed":
			ReportOutcome(ctx, name)
			return nil
		case "not_due":
			return fmt.Errorf("order %s is not due yet (its deadline is later than the task's execute time)", p.OrderNo)
		case "skipped_locked":
			return fmt.Errorf("order %s is locked by another close or a payment", p.OrderNo)
		case "not_found":
			return Permanent(fmt.Errorf("order %s not found", p.OrderNo))
		case "parked":
			return Permanent(fmt.Errorf("order %s: its close is parked in order_dead_letter", p.OrderNo))
		default:
			return fmt.Errorf("close order %s: outcome %s", p.OrderNo, name)
		}
	}
}
