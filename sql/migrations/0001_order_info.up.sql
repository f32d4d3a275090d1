-- Orders, in the shape of the XXL-JOB order-close article; users point the
-- executor at their existing order_info, so the article's columns and the
-- (status, create_time) index are kept as they are.
CREATE TABLE IF NOT EXISTS order_info (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    order_no        VARCHAR(64)  NOT NULL,
    user_id         BIGINT       NOT NULL,
    status          TINYINT      NOT NULL DEFAULT 0 COMMENT '0 unpaid, 1 paid, 2 closed',
    create_time     DATETIME     NOT NULL DEFAULT CURRENT_TIMESTAMP,
    timeout_minutes INT          NOT NULL DEFAULT 30,
    coupon_id       BIGINT       NULL,
    update_time     DATETIME     NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    PRIMARY KEY (id),
    UNIQUE KEY uk_order_no (order_no),
    KEY idx_status_create_time (status, create_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
