-- The admin's log id of a close run triggered by XXL-JOB (0: started
-- otherwise, e.g. `executor run`). An executor restarted after a crash
-- records the close run it was doing then, which wrote no row, once: it
-- looks the log id up first.
--   idx_log_id   that look-up
-- Added with a default: INSTANT; the index is built online.
ALTER TABLE order_close_run ADD COLUMN log_id BIGINT NOT NULL DEFAULT 0;
CREATE INDEX idx_log_id ON order_close_run (log_id);
