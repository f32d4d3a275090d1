-- The fulfillment-timeout job's keyset scan: status = 1 AND pay_time <=
-- cutoff, ordered by (pay_time, id). Paid orders without pay_time sort first
-- and are skipped by the range.
ALTER TABLE order_info ADD INDEX idx_status_pay_time (status, pay_time);
