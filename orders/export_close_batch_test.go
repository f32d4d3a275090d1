package orders

// OrdersForCloseSQL exposes CloseOrders' first read to the EXPLAIN test.
const OrdersForCloseSQL = ordersForCloseSQL
