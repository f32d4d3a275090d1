package closesql

// This file holds the statements of the capped runs' cursors
// (order_close_cursor): one row per order table and shard, a hint where the
// next capped run of that shard resumes (orders' store_cursor.go).

// CloseCursor reads where the next capped run of the shard of a unit's
// order table starts.
// A primary-key lookup; zero or one row (none when the saved one is of
// another shard rule). The time is create_time_exact, to the millisecond,
// unless an executor of an earlier release has since moved create_time
// alone (migration 0140).
const CloseCursor = `
SELECT IF(ABS(TIMESTAMPDIFF(MICROSECOND, create_time, create_time_exact)) < 1000000, create_time_exact, create_time) AS create_time,
  order_id FROM order_close_cursor
WHERE order_table = :order_table AND shard_total = :shard_total AND shard_index = :shard_index AND shard_rule = :shard_rule`

// SetCloseCursor records where the shard's next capped run starts;
// ClearCloseCursor makes it start at the head. One row by primary key.
const (
	SetCloseCursor = `
INSERT INTO order_close_cursor (order_table, shard_total, shard_index, shard_rule, create_time, create_time_exact, order_id, updated_at)
VALUES (:order_table, :shard_total, :shard_index, :shard_rule, :create_time, :create_time, :order_id, UTC_TIMESTAMP(3))
ON DUPLICATE KEY UPDATE shard_rule = VALUES(shard_rule), create_time = VALUES(create_time),
  create_time_exact = VALUES(create_time_exact), order_id = VALUES(order_id), updated_at = VALUES(updated_at)`
	ClearCloseCursor = `DELETE FROM order_close_cursor
WHERE order_table = :order_table AND shard_total = :shard_total AND shard_index = :shard_index`
)
