-- payment_conflict keyed by payment: one row for every distinct payment
-- that is owed back (a late payment of a closed order, or a second payment
-- of an order already paid by another), however often the payment side
-- repeats its notification, instead of one row per order. Rows written
-- before carry no payment id: they get 'legacy:' + order_no, the id Pay
-- derives for a payment without one, so a repeated legacy notification
-- still finds its row.
--   payment_id     the payment side's id of the payment (uk_payment_id)
--   reason         late (the order was closed) or duplicate (already paid)
--   channel        the payment channel, when the notification says
--   refund_status  owed, or refunded once an operator recorded the refund
-- Each ALTER adds a column with a default or an index: ALGORITHM=INSTANT
-- or INPLACE with LOCK=NONE, no table copy.
ALTER TABLE payment_conflict ADD COLUMN payment_id VARCHAR(128) NOT NULL DEFAULT '';
ALTER TABLE payment_conflict ADD COLUMN reason VARCHAR(16) NOT NULL DEFAULT 'late';
ALTER TABLE payment_conflict ADD COLUMN channel VARCHAR(32) NOT NULL DEFAULT '';
ALTER TABLE payment_conflict ADD COLUMN refund_status VARCHAR(16) NOT NULL DEFAULT 'owed';
ALTER TABLE payment_conflict ADD COLUMN refunded_at DATETIME(3) NULL;
ALTER TABLE payment_conflict ADD COLUMN refund_note VARCHAR(255) NOT NULL DEFAULT '';
UPDATE payment_conflict SET payment_id = CONCAT('legacy:', order_no) WHERE payment_id = '';
ALTER TABLE payment_conflict ADD UNIQUE KEY uk_payment_id (payment_id);
ALTER TABLE payment_conflict ADD KEY idx_order_no (order_no);
ALTER TABLE payment_conflict ADD KEY idx_refund_status_created (refund_status, created_at);
ALTER TABLE payment_conflict DROP INDEX uk_order_no;
