-- When the close job closed the order (added to an existing order_info).
ALTER TABLE order_info ADD COLUMN close_time DATETIME(3) NULL;
