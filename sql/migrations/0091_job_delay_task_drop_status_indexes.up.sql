-- A claim and a DONE change a task's status and updated_at, so every index
-- holding either is rewritten twice per task. Only idx_status_next_attempt
-- stays: stuck-task recovery walks its RUNNING entries, purge, the
-- operators' lists and counts its status prefix or due time, and the
-- RabbitMQ reconciler uses idx_published_next (0090). Dropping an index is
-- in place and does not block writes.
ALTER TABLE job_delay_task DROP INDEX idx_status_published, DROP INDEX idx_status_updated;
