-- Payments that arrived for orders already closed: each row tells the
-- business a refund is owed. One row per order (uk_order_no), however often
-- the payment side repeats its notification. paid_at and created_at are on
-- the database clock in the session time zone, like order_info's times.
CREATE TABLE IF NOT EXISTS payment_conflict (
    id         BIGINT        NOT NULL AUTO_INCREMENT,
    order_no   VARCHAR(64)   NOT NULL,
    pay_amount DECIMAL(12,2) NOT NULL,
    paid_at    DATETIME(3)   NOT NULL,
    created_at DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_order_no (order_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
