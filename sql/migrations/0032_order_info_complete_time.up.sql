-- When the order was completed (status 4): confirmed by the buyer or by the
-- auto-confirm job.
ALTER TABLE order_info ADD COLUMN complete_time DATETIME(3) NULL;
