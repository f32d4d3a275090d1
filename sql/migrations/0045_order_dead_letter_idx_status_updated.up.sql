-- The operator's bulk requeue (executor deadletter requeue -status S [-since
-- T] [-error-like X]): a range over one status, from a time on, in the order
-- letters last failed or changed; the error text is only checked on the
-- rows of that range, so resolved letters, which pile up, are never read.
-- InnoDB builds it in place without blocking writes.
ALTER TABLE order_dead_letter ADD INDEX idx_status_updated (status, updated_at);
