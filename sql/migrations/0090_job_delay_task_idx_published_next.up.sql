-- The RabbitMQ timer's reconciler: tasks never confirmed published
-- (published_at IS NULL), in due order. Neither column changes when a task
-- is claimed or done, so neither rewrites this index (the status-led
-- idx_status_published, which both rewrote, goes in 0091). InnoDB builds it
-- in place without blocking writes.
ALTER TABLE job_delay_task ADD INDEX idx_published_next (published_at, next_attempt_time);
