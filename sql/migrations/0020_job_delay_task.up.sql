-- Durable delayed tasks ("close order X at time T"), the source of truth
-- behind the Redis timer. All times are UTC (written from UTC_TIMESTAMP(3) or
-- UTC Go times), whatever the session time_zone.
--   uk_biz_uuid             idempotent registration (ascii_bin: exact match)
--   idx_status_next_attempt claims, the sweep, the reconciler, the backlog
--   idx_status_updated      stuck RUNNING recovery and retention purge
-- claim_id fences a claim: only the dispatcher holding the current claim may
-- finish the task (a recovered task's old runner writes 0 rows).
CREATE TABLE IF NOT EXISTS job_delay_task (
    id                BIGINT        NOT NULL AUTO_INCREMENT,
    trace_id          VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    biz_uuid          VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    handler           VARCHAR(255)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    execute_time      DATETIME(3)   NOT NULL,
    next_attempt_time DATETIME(3)   NOT NULL,
    payload_json      TEXT          NOT NULL,
    status            VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'PENDING' COMMENT 'PENDING, RUNNING, DONE, FAILED, CANCELLED',
    retry_count       INT           NOT NULL DEFAULT 0,
    max_retry         INT           NOT NULL DEFAULT 3,
    last_error        VARCHAR(2000) NOT NULL DEFAULT '',
    claim_id          BIGINT        NOT NULL DEFAULT 0,
    created_at        DATETIME(3)   NOT NULL,
    updated_at        DATETIME(3)   NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_trace_id (trace_id),
    UNIQUE KEY uk_biz_uuid (biz_uuid),
    KEY idx_status_next_attempt (status, next_attempt_time),
    KEY idx_status_updated (status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
