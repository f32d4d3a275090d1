-- Why the order was closed, e.g. payment_timeout.
ALTER TABLE order_info ADD COLUMN close_reason VARCHAR(32) NULL;
