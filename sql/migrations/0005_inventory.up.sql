-- Placing an order moves quantity from available to locked; payment consumes
-- locked; closing moves it back to available.
CREATE TABLE IF NOT EXISTS inventory (
    sku_id    BIGINT NOT NULL,
    available BIGINT NOT NULL DEFAULT 0,
    locked    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (sku_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
