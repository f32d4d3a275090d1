-- When the order was paid (database time, set by Pay's status CAS). NULL for
-- unpaid orders and for orders paid before this column existed; the
-- fulfillment-timeout job only considers paid orders that have it.
ALTER TABLE order_info ADD COLUMN pay_time DATETIME(3) NULL;
