-- The payment each paid order was paid with, written by Pay/PayWith in the
-- transaction that marks the order paid: a later notification with another
-- payment id is a second payment of the order (payment_conflict, reason
-- duplicate), one with the same id a repeat. Orders paid before this table
-- have no row; their repeats cannot be told from duplicates and are taken
-- as repeats. paid_at and created_at are on the database clock in the
-- session time zone, like order_info's times.
CREATE TABLE IF NOT EXISTS order_payment (
    id         BIGINT        NOT NULL AUTO_INCREMENT,
    payment_id VARCHAR(128)  NOT NULL,
    order_no   VARCHAR(64)   NOT NULL,
    amount     DECIMAL(12,2) NOT NULL,
    channel    VARCHAR(32)   NOT NULL DEFAULT '',
    paid_at    DATETIME(3)   NOT NULL,
    created_at DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_payment_id (payment_id),
    UNIQUE KEY uk_order_no (order_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
