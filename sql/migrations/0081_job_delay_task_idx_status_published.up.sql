-- The RabbitMQ timer's reconciler: PENDING tasks never confirmed published
-- (published_at IS NULL), oldest change first, as a keyset over
-- (updated_at, id). InnoDB builds it in place without blocking writes.
ALTER TABLE job_delay_task ADD INDEX idx_status_published (status, published_at, updated_at);
