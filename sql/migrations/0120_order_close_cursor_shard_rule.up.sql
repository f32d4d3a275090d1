-- Which rule assigned orders to shards when the cursor was saved: 0 for
-- id % total (every cursor saved before this column), 1 for the hash of
-- internal/shard. A run reads only a cursor of its own rule, so the
-- positions saved under id % total are ignored once and the next capped
-- run of each shard starts at the head. Added with a default: INSTANT.
ALTER TABLE order_close_cursor ADD COLUMN shard_rule TINYINT NOT NULL DEFAULT 0;
