-- Paid orders not shipped within order.timeout.fulfillment_timeout_days,
-- flagged once each (uk_order_no) by orderFulfillmentTimeoutJob for the
-- merchant side to act on. Flagging never changes the order itself. There is
-- no shop column: order_info has no shop; join order_info (order_id) for
-- what the merchant side needs. pay_time and deadline are copies of the
-- order's values when it was flagged, in the session time zone like
-- create_time.
CREATE TABLE IF NOT EXISTS order_fulfillment_overdue (
    id         BIGINT      NOT NULL AUTO_INCREMENT,
    order_id   BIGINT      NOT NULL,
    order_no   VARCHAR(64) NOT NULL,
    user_id    BIGINT      NOT NULL,
    pay_time   DATETIME(3) NOT NULL,
    deadline   DATETIME(3) NOT NULL COMMENT 'pay_time + fulfillment_timeout_days of the run that flagged it',
    flagged_at DATETIME(3) NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_order_no (order_no),
    KEY idx_flagged_at (flagged_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
