-- Compensation events of closed orders (outbox mode), written in the close
-- transaction and delivered after commit by the relay. Times are UTC
-- (UTC_TIMESTAMP(3)), whatever the session time zone.
--   uk_order_event   one event of a type per order; order_no:event_type is
--                    the idempotency key receivers dedupe on
--   idx_status_next  the relay's claims (pending and due) and the purge of
--                    delivered events (done, by delivery time)
-- A claim sets claim_id and moves next_attempt_at to the claim's end; claim_id
-- fences it: only the relay holding the current claim may mark the event
-- done or schedule its retry.
CREATE TABLE IF NOT EXISTS order_outbox (
    id              BIGINT        NOT NULL AUTO_INCREMENT,
    event_type      VARCHAR(32)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_no        VARCHAR(64)   NOT NULL,
    payload         TEXT          NOT NULL,
    trace_id        VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    status          VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending' COMMENT 'pending, done',
    attempts        INT           NOT NULL DEFAULT 0,
    next_attempt_at DATETIME(3)   NOT NULL,
    claim_id        BIGINT        NOT NULL DEFAULT 0,
    last_error      VARCHAR(2000) NOT NULL DEFAULT '',
    created_at      DATETIME(3)   NOT NULL,
    delivered_at    DATETIME(3)   NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_order_event (order_no, event_type),
    KEY idx_status_next (status, next_attempt_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
