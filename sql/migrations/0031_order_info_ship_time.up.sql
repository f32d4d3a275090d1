-- When the order was shipped (status 3), written by the order service with
-- the status change. The auto-confirm job completes shipped orders
-- order.timeout.auto_confirm_days after it.
ALTER TABLE order_info ADD COLUMN ship_time DATETIME(3) NULL;
