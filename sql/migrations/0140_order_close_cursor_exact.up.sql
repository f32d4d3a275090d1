-- The capped runs' cursor keeps the order time to the millisecond in
-- create_time_exact: a shop declaring order.schema.timeUnit: epochMillis
-- (or DATETIME(3) columns) resumes exactly after the last order handled,
-- not at that order's second. create_time is still written, to the second,
-- for an executor of an earlier release; the cursor is read from
-- create_time_exact when it lies within a second of create_time (a row an
-- earlier release updated since has a stale one), else from create_time,
-- as before. NULL on the rows written before. Added instantly.
ALTER TABLE order_close_cursor ADD COLUMN create_time_exact DATETIME(3) NULL;
