CREATE TABLE IF NOT EXISTS user_coupon (
    id       BIGINT      NOT NULL AUTO_INCREMENT,
    user_id  BIGINT      NOT NULL,
    status   TINYINT     NOT NULL DEFAULT 0 COMMENT '0 unused, 1 locked by an unpaid order, 2 used',
    order_no VARCHAR(64) NULL,
    PRIMARY KEY (id),
    KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
