-- Outbox events the relay stopped trying: status 'parked' (beside pending
-- and done) once the receiver answered permanently (400, 401, 403, 404,
-- 409, 410, 422) or after outbox.maxAttempts failed attempts, with why and
-- when; an operator requeues them (back to pending, attempts from zero).
-- Parked events stay on idx_status_next (status 'parked', next_attempt_at
-- the park time), off the relay's claims. Times are UTC.
ALTER TABLE order_outbox ADD COLUMN park_reason VARCHAR(255) NOT NULL DEFAULT '';
ALTER TABLE order_outbox ADD COLUMN parked_at DATETIME(3) NULL;
