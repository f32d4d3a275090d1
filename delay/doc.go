// Package delay runs durable delayed tasks: "close order X at time T",
// registered when the order is placed and fired on time, with the cron
// sweep kept as the safety net.
//
// # Pieces
//
//   - job_delay_task (MySQL) is the truth: one row per task, unique by the
//     caller's bizUuid (so retried registrations never create twice) and by a
//     generated trace id carried to the handler.
//   - A Timer says when tasks fall due; it is only an index: a popped id
//     is claimed in the table, and what the timer lost is put back by the
//     reconciler (of the Redis timer's dispatchers, one per interval), so
//     losing the timer loses time, never a task. The default
//     (NewRedisTimer) is a Redis sorted set whose members are task ids and
//     scores next attempt times; dispatchers pop due members with one Lua
//     script (ZRANGEBYSCORE and ZREM atomically), so no member is handed
//     out twice or dropped between read and removal. Split over several
//     hash-tagged sets (RedisTimerConfig.Shards), it spreads over the
//     masters of a Redis Cluster; each look pops every shard that has
//     something due. NewRabbitMQTimer keeps
//     the tasks in RabbitMQ instead, without the delayed-message plugin: a
//     message (task id, due time, attempt; never the payload) hops through
//     delay-tier quorum queues of power-of-two TTLs, dead-lettered at least
//     once into a ready queue, until less than a second is left, which the
//     consuming dispatcher holds in memory; it is acknowledged only once
//     the task's result (or its next hop) is stored. A queue has no
//     membership test, so published_at records the broker's confirm and
//     the reconciler publishes again what was never confirmed, or is
//     overdue and long published; the claim drops the duplicates.
//   - The claim is a CAS in the table: PENDING and due → RUNNING under a
//     fresh claim_id. Every later write repeats the claim_id, so a runner
//     whose task was recovered and claimed again writes nothing.
//   - A task is claimed only when a worker is free to start it at once (the
//     poller and the sweep alike), so its RUNNING age is its handler's.
//     Handlers run under HandlerTimeout; HandlerTimeout + HandlerGrace (what
//     a handler may take after its cancellation) stays within 90% of
//     RunningTimeout, after which a RUNNING task counts as stuck and is
//     recovered, so a runner that is alive never sees its task run twice.
//   - An attempt that says "not now" (NotNow: the order's lock held
//     elsewhere, Redis or the database unreachable, the payment side
//     failing) goes back to PENDING without spending a retry, after
//     NotNowBackoff doubling to NotNowBackoffMax, for NotNowMaxAge after the
//     execute time; one that came too early (NotDue: the order's deadline is
//     later) moves to the due time. Only real failures count against
//     maxRetry. A claim whose read-back fails is given back at once.
//   - A batch handler (Config.BatchHandlers, BatchHandlerFunc) gets the
//     claimed tasks of its name together, up to HandlerBatchSize per call,
//     and returns one result per task; each is recorded on its own, with
//     the same DONE / retry / FAILED rules (the DONE ones of a call in one
//     transaction). orderTimeoutClose runs that way in the executor
//     (handlers.DelayOrderCloseBatch over orders.Closer.CloseOrders): one lock
//     pipeline and one close transaction per batch instead of per order.
//     A call counts as one of the Workers.
//
// # States
//
//	PENDING ──claim (CAS)──► RUNNING ──success──────────────────────► DONE
//	   ▲                        │
//	   ├────────────────────────┤ not now, not due, released by shutdown or
//	   │                        │ a failed read-back (no retry spent);
//	   │                        │ failure with retries left (next attempt
//	   │                        │ after backoff), stuck RUNNING longer than
//	   │                        │ RunningTimeout
//	   │                        └── failure, no retry left, or Permanent ──► FAILED
//	   └── requeue (operator) ◄───────────────────────────────────────────── FAILED
//
//	PENDING or FAILED ──cancel──► CANCELLED
//	DONE or CANCELLED ──older than Retention──► purged
//
// # Use
//
// An order service registers inside the transaction that creates the
// order, so the task exists if and only if the order does, then tells the
// timer after the commit:
//
//	t, _, err := client.RegisterTx(ctx, tx, delay.OrderTimeoutClose(orderNo, deadline))
//	// ... commit ...
//	_ = client.Schedule(ctx, t) // best effort; the reconciler covers a miss
//
// Others use Register (its own transaction), or POST /api/delay-tasks
// (API). Every executor runs a Dispatcher (Start/Stop); the XXL-JOB job
// delayTaskSweepJob calls Dispatcher.Sweep for tasks the timer missed.
//
// Times in the table are UTC and "due" is judged by the database's clock
// (UTC_TIMESTAMP), which dispatchers estimate locally (offset measured at
// each reconcile) to read the timer without a round trip.
package delay
