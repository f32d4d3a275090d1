-- Who recorded a refund (an operator's console name, or what the CLI or the
-- API was told), beside when (refunded_at). Added with a default: INSTANT.
ALTER TABLE payment_conflict ADD COLUMN refunded_by VARCHAR(64) NOT NULL DEFAULT '';
