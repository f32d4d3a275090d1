package delay

import "time"

// OrderTimeoutCloseHandler is the in-process handler that closes one unpaid
// order whose payment timeout has passed (package handlers holds it: this
// package only carries the task).
const OrderTimeoutCloseHandler = "orderTimeoutClose"

// OrderTimeoutPayload is the payload of an orderTimeoutClose task.
type OrderTimeoutPayload struct {
	OrderNo string `json:"orderNo"`
	// Table is the order table the order is in, for a database holding
	// several (order.sources). Empty, as in every task registered before
	// payloads named one: the default order table (order.schema.table).
	Table string `json:"table,omitempty"`
}

// OrderTimeoutClose registers the order with number orderNo, in the
// default order table, to be closed at deadline (its create_time plus its
// timeout, as the order service stored them): bizUuid
// "order-timeout-{orderNo}".
func OrderTimeoutClose(orderNo string, deadline time.Time) Registration {
	return OrderTimeoutCloseIn("", orderNo, deadline)
}

// OrderTimeoutCloseIn is OrderTimeoutClose for an order in the order table
// table of its database (an order.sources unit, such as t_order_7). The
// bizUuid does not name the table: order numbers are unique across the
// tables of a database.
func OrderTimeoutCloseIn(table, orderNo string, deadline time.Time) Registration {
	return Registration{
		BizUUID:     "order-timeout-" + orderNo,
		Handler:     OrderTimeoutCloseHandler,
		ExecuteTime: deadline,
		Payload:     OrderTimeoutPayload{OrderNo: orderNo, Table: table},
	}
}

// SourceKeyPrefix is the Redis key prefix of the delayed tasks kept in the
// database of the order source called source (order.sources), when that
// is not the executor's home database (whose tasks keep keyPrefix):
// keyPrefix + "source:" + source + ":". Each database's tasks have their
// own ids, so each has its own timer.
func SourceKeyPrefix(keyPrefix, source string) string {
	return keyPrefix + "source:" + source + ":"
}

// SourceRabbitMQPrefix is SourceKeyPrefix for the RabbitMQ timer's
// exchange and queue names: prefix + "source." + source + ".".
func SourceRabbitMQPrefix(prefix, source string) string {
	return prefix + "source." + source + "."
}
