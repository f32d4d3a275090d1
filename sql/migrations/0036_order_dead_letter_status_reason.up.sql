-- Why a dead letter is parked or resolved, for the operator: parked after the
-- maximum attempts or because the order is gone, resolved as already paid or
-- closed. Written by deadLetterRetryJob; empty while waiting (a requeue clears
-- it) and when the close sweep itself resolved or parked the letter.
ALTER TABLE order_dead_letter ADD COLUMN status_reason VARCHAR(255) NOT NULL DEFAULT '';
