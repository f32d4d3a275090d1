-- Many order tables per database (order.sources): a close dead letter
-- names the order table its order is in, so deadLetterRetryJob replays it
-- with that table's close (t_order_0 ... t_order_15 share one
-- order_dead_letter per database).
--   order_table   the unit's table, written by the close; '' on letters
--       written before: the first unit of the letter's database takes
--       them and looks for the order in each of its tables.
--   idx_table_status_retry   the retry job's scan of one table's due
--       waiting letters, in retry order.
-- The column is added instantly; the index is built in place without
-- blocking writes.
ALTER TABLE order_dead_letter ADD COLUMN order_table VARCHAR(64) NOT NULL DEFAULT '';
ALTER TABLE order_dead_letter ADD INDEX idx_table_status_retry (order_table, status, next_retry_at);
