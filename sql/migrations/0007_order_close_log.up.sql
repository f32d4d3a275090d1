-- One row per closed order; the unique key makes a second close impossible.
CREATE TABLE IF NOT EXISTS order_close_log (
    id        BIGINT      NOT NULL AUTO_INCREMENT,
    order_no  VARCHAR(64) NOT NULL,
    closed_at DATETIME(3) NOT NULL,
    reason    VARCHAR(32) NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_order_no (order_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
