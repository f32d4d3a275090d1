-- The auto-confirm job's keyset scan: status = 3 AND ship_time <= cutoff,
-- ordered by (ship_time, id). InnoDB builds it in place without blocking
-- writes.
ALTER TABLE order_info ADD INDEX idx_status_ship_time (status, ship_time);
