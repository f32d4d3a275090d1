-- When the RabbitMQ timer's broker confirmed the message of the task's
-- current schedule (database time, UTC). Every change that makes a task
-- PENDING at a new time sets it back to NULL; the reconciler publishes again
-- the PENDING tasks still NULL some seconds after their last change, since a
-- queue cannot be asked whether it holds a task. The Redis timer leaves it
-- NULL (its reconciler asks the sorted set instead).
ALTER TABLE job_delay_task ADD COLUMN published_at DATETIME(3) NULL;
