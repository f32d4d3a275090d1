-- What the user pays for the order, in the currency's main unit. Recorded in
-- payment_conflict when a payment arrives for an order already closed. The
-- default keeps existing rows and inserts that do not set it valid; MariaDB
-- 10.3+ and MySQL 8 add a column with a default in place (ALGORITHM=INSTANT).
ALTER TABLE order_info ADD COLUMN pay_amount DECIMAL(12,2) NOT NULL DEFAULT 0.00;
