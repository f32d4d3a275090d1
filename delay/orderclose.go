package delay

import "time"

// OrderTimeoutCloseHandler is the in-process handler that closes one unpaid
// order whose payment timeout has passed (package handlers holds it: this
// package only carries the task).
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
