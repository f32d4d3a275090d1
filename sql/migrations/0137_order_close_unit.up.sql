-- Many order databases and tables (order.sources): a close run, and the
-- cursor of a capped run, belong to one unit, an order table of one
-- source. Each source database keeps its own executor tables, so the
-- source is known there; the table is not when a database holds several
-- (t_order_0 ... t_order_15).
--   order_close_cursor.order_table   the unit's table, part of the key:
--       each table's capped runs resume where that table's stopped. The
--       cursors saved before have '' and are ignored once (a cursor is a
--       hint: the next capped run starts at the head).
--   order_close_run.order_source, order_table   the unit a run closed in,
--       for the console's history; '' on rows written before.
-- Added with defaults; the new primary key of the small cursor table is a
-- copy of a few rows.
ALTER TABLE order_close_cursor ADD COLUMN order_table VARCHAR(64) NOT NULL DEFAULT '', DROP PRIMARY KEY, ADD PRIMARY KEY (order_table, shard_total, shard_index);
ALTER TABLE order_close_run ADD COLUMN order_source VARCHAR(64) NOT NULL DEFAULT '', ADD COLUMN order_table VARCHAR(64) NOT NULL DEFAULT '';
