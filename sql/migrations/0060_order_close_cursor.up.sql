-- Where the next capped run (maxOrders) of each shard of the close sweep
-- starts: the keyset position (create_time, id) of the last due order the
-- previous capped run handled. Runs resume after it and wrap around to the
-- head, so orders that never close cannot hold the cap at the head. A row
-- is a hint: losing it only means the next run starts at the head.
-- create_time is order_info's (session wall clock); updated_at is UTC.
CREATE TABLE IF NOT EXISTS order_close_cursor (
    shard_total INT         NOT NULL,
    shard_index INT         NOT NULL,
    create_time DATETIME    NOT NULL,
    order_id    BIGINT      NOT NULL,
    updated_at  DATETIME(3) NOT NULL,
    PRIMARY KEY (shard_total, shard_index)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
