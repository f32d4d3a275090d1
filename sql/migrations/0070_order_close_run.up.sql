-- One row per run of the close sweep (orderTimeoutCloseJob, executor run),
-- written when the run ends, whatever its result: the history the operator
-- console reads (recent runs, what the last hour closed, how late) without
-- touching order_close_log, which has no time index and is huge in
-- production. Old rows are deleted by the runs themselves after the
-- retention (order.timeout.runRetentionDays). Times are the database clock
-- in the session time zone, like order_info's.
--   idx_finished_at   the last hour's figures and the retention purge
-- result is the run's summary line (what the admin shows as its result),
-- error what stopped it, if anything.
CREATE TABLE IF NOT EXISTS order_close_run (
    id              BIGINT        NOT NULL AUTO_INCREMENT,
    started_at      DATETIME(3)   NOT NULL,
    finished_at     DATETIME(3)   NOT NULL,
    host            VARCHAR(64)   NOT NULL DEFAULT '',
    source          VARCHAR(64)   NOT NULL DEFAULT '',
    shard_index     INT           NOT NULL DEFAULT 0,
    shard_total     INT           NOT NULL DEFAULT 1,
    dry_run         TINYINT       NOT NULL DEFAULT 0,
    scanned         INT           NOT NULL DEFAULT 0,
    closed          INT           NOT NULL DEFAULT 0,
    skipped_paid    INT           NOT NULL DEFAULT 0,
    skipped_locked  INT           NOT NULL DEFAULT 0,
    dead_lettered   INT           NOT NULL DEFAULT 0,
    lock_errors     INT           NOT NULL DEFAULT 0,
    trade_errors    INT           NOT NULL DEFAULT 0,
    max_lateness_ms BIGINT        NOT NULL DEFAULT 0 COMMENT 'close time minus deadline of the latest-closed order',
    result          VARCHAR(255)  NOT NULL DEFAULT '',
    error           VARCHAR(2000) NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    KEY idx_finished_at (finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
