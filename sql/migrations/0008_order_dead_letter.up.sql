-- Orders whose close failed; one row per order and stage, attempts counted.
CREATE TABLE IF NOT EXISTS order_dead_letter (
    id            BIGINT        NOT NULL AUTO_INCREMENT,
    order_no      VARCHAR(64)   NOT NULL,
    stage         VARCHAR(32)   NOT NULL,
    status        VARCHAR(16)   NOT NULL DEFAULT 'waiting' COMMENT 'waiting, resolved, parked',
    last_error    VARCHAR(2000) NOT NULL DEFAULT '',
    attempts      INT           NOT NULL DEFAULT 1,
    next_retry_at DATETIME(3)   NOT NULL,
    created_at    DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    updated_at    DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_order_stage (order_no, stage),
    KEY idx_status_retry (status, next_retry_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
