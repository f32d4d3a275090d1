CREATE TABLE IF NOT EXISTS order_item (
    id       BIGINT      NOT NULL AUTO_INCREMENT,
    order_no VARCHAR(64) NOT NULL,
    sku_id   BIGINT      NOT NULL,
    quantity INT         NOT NULL,
    PRIMARY KEY (id),
    KEY idx_order_no (order_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
