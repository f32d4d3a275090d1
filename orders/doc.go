// Package orders closes unpaid orders whose payment timeout has passed.
// The order service's side of the same rules (placing, paying, shipping an
// order) is package payment, which shares its lock key and lock order.
//
// It holds:
//
//   - the close path: Closer.Run (the sweep), CloseOrder and CloseOrders
//     (delayed tasks), the close transaction with its compensation, local
//     or through outbox events, and the dead letters it writes and resolves;
//   - the retry path: Closer.RetryDeadLetters replays due dead letters;
//   - the payment step: a TradeCloser asked before a page is closed
//     (payment.HTTPTradeCloser);
//
// Its locks are package orderlock's, the dead-letter operators' view is
// package deadletters, the refunds owed package refunds, the lifecycle jobs
// after payment (auto-confirm, fulfilment flags) are package lifecycle,
// outbox mode's events, their relay and their operators' view are package
// outbox, the lists' shared terms are package oplist and the status values
// package orderstatus; none of them imports this package. The order service
// (package payment), the operators' order view and the records of close
// runs (written by Closer.Run; package inspect) import this one; this one
// never imports them.
//
// # When an order has expired
//
// An order is due for closing when it is unpaid (order_info.status = 0) and
// its own deadline, create_time + timeout_minutes (the row's value, not a
// global setting), is at or before "now". "Now" is the DATABASE's clock, read
// once per run with SELECT NOW(3), never the executor's: executors' clocks
// drift apart, and the database is the one referee both the order service
// and every executor see.
//
// # Time zone
//
// create_time is a DATETIME: a wall-clock time without a zone, written by the
// order service in its session time zone. The close job compares it, in SQL
// and in Go, with NOW() read in the same session time zone, so both sides
// must use the same one (config mysql.timeZone sets the session's; empty
// keeps the server's default). The DSN carries parseTime=true&loc=UTC, which
// makes the driver hand DATETIME values back and forth with their wall clock
// unchanged (the "UTC" label is only a container), so no conversion ever
// happens in the executor.
//
// In a zone with daylight saving that comparison is off by up to an hour
// around each change (a wall-clock hour skipped in spring, repeated in
// autumn). ReadSessionZone tells such a zone by the offsets the server
// computes for a January and a July instant, so the binary can refuse it.
//
// # What closing changes
//
// The names below are the executor's own schema (schema.Default). A shop
// that keeps its orders in its own tables declares them
// (CloserConfig.Schema, order.schema): the statements are then rendered
// from its names once, in NewCloser (render.go), the stock columns are
// added or subtracted as declared, the coupon is found by id or by
// matching columns, and per-order amounts such as points are given back
// too (giveback.go); each still one statement per page.
//
// In one transaction per order (or per page of orders, see below):
//
//   - order_info: status 0 → 2, close_time (database time), close_reason
//     ("payment_timeout" by default). The UPDATE repeats status = 0 in its
//     WHERE and checks the rows affected: an order paid in the meantime is
//     never closed, even by a holder whose Redis lock has expired. The
//     database is the fence; the lock only keeps payers and closers apart.
//   - inventory: each item's quantity moves from locked back to available,
//     summed per SKU and applied in ascending sku_id order (every
//     transaction here locks stock rows in that order, so hot SKUs do not
//     deadlock). A missing inventory row, or locked stock below what is to be
//     released, is an error for the orders concerned: the close never creates
//     stock rows or drives locked negative.
//   - user_coupon: the order's coupon goes from locked by this order
//     (status 1, order_no = the order) back to unused (status 0, order_no
//     NULL). A coupon in any other state is an error for that order.
//   - order_close_log: one row per closed order; its unique key makes a
//     second close of an order impossible.
//   - order_dead_letter: a waiting close dead letter of the order, if it
//     has one, is resolved.
//
// Either all of it commits or none of it does. Before COMMIT the transaction
// checks that the order locks are still valid (their validity window has not
// passed); if not, it rolls back and the orders are left to the next pass.
//
// # A run
//
// Run walks idx_status_create_time in keyset pages ((create_time, id) after
// the last row of the previous page, never OFFSET) over status = 0 AND
// create_time <= now, keeping the rows of its shard (a hash of the id, internal/shard) whose
// own deadline has passed. So its cost grows with the number of due orders
// (plus the unpaid orders still within their timeout), not with the size of
// the table. The scan is a plain read without locks, so shards and
// overlapping runs never wait on each other there. For each page it learns
// which orders have an open dead letter (one short read when there are few),
// reads the orders' lines, and takes the orders' Redis locks in one pipeline
// (a lock held elsewhere, e.g. by a payment in progress, means skip the order
// and count it as skipped_locked); then it closes the locked orders in one
// guarded close, a transaction of writes only: the status CAS repeats what
// the scan saw (unpaid, due) and is the page's claim, and the changes above
// follow with one multi-row statement per table, each of which must change
// exactly the expected rows. If one does not (an order paid or given a
// longer timeout since the scan, a stock row or coupon not as expected),
// the transaction rolls back and the page is closed by its one fallback, a
// checked close (see below). A scanner goroutine
// prepares the next page (scan, letters, lines and locks) while the current
// one is being closed; with a rate cap or a payment step, whose waits and
// calls would age a lease taken ahead, a page is locked when its close
// begins (and a lease aged past half the TTL is taken again). MaxPerSecond paces closes,
// MaxOrders caps a run (closed and skipped orders alike; a capped run
// resumes where the shard's last one stopped and wraps around, so orders
// that never close cannot starve the others), DryRun only counts.
// Cancellation is checked between pages; a page in progress finishes whole,
// within its lease (CancelBound).
//
// # Failures: compensation and dead letters
//
// A page is first closed by a guarded close: the stock and coupon UPDATEs
// repeat the expected state in their WHERE (locked >= quantity; coupon
// locked by that order) and must change exactly one row per SKU and coupon,
// as the status CAS must change every order. If one does not, the
// transaction rolls back and the page is closed by a checked close: the
// orders are locked and read first (by id) and those no longer unpaid and
// due skipped with their outcome, then every stock row (by key) and coupon
// is locked and checked: an order whose data is wrong (missing stock row,
// coupon not locked by it, too little locked stock) is set aside before any
// write, and the rest of the page closes. Each order set aside is then
// closed, or dead-lettered, in a checked close of its own. Both kinds take
// their locks in one order (orders, stock, coupons, other givebacks) and
// check the lease last, before commit.
//
// Errors are classified by what they are about before anything else
// (ErrorKind, KindOf), whatever the page size. Deadlocks (1213) and lock
// wait timeouts (1205) are retried a few times. If the batch transaction
// still fails on contention or on an error about one order's rows (an
// allow-list: our own compensation checks, a duplicate close-log row, a
// value out of range, a constraint), it is rolled back and every order of
// the page is closed in a transaction of its own. Any other error (a missing
// table, column or privilege, a read-only or unreachable server) is about
// the database, not an order: the run stops with it (Hint says what to do),
// nothing is dead-lettered, and the next run tries the same orders again.
// An order whose own transaction stays contended is skipped for the next
// pass. An order whose own transaction fails on its rows is recorded in
// order_dead_letter (stage "close") by a separate statement after the
// rollback: attempts counted, last_error kept, next_retry_at pushed back
// exponentially (DeadLetterBackoff), status back to "waiting" unless an
// operator (or ParkAfter) parked it. The sweep leaves the order alone until
// next_retry_at, and for good once parked; a later successful close resolves
// the dead letter in the same transaction. One bad order never blocks or
// rolls back the others.
//
// A Redis failure never closes or dead-letters an order: the rule is written
// once, where every close path takes its locks (Closer.lockNos, scanner.go).
//
// Closer.RetryDeadLetters (deadLetterRetryJob) replays due waiting letters
// with CloseOrder after claiming each one, resolves letters whose order was
// paid or closed meanwhile, and parks those whose order is gone;
// Package deadletters lists, shows and requeues them for operators.
//
// # Locks
//
// Every close path and the order service's side (package payment) lock an
// order under the same key, {prefix}order:close:{orderNo}, with an
// orderlock.Locker (a pipelined bulk locker that interoperates with
// redsync mutexes; single Redis, Sentinel, Cluster or Redlock).
//
// # The payment side, late payments and outbox compensation
//
// With CloserConfig.TradeCloser set, the locked, still unpaid and due orders
// of a page have their trade closed at the payment side (at most
// TradeFanOut calls at once, within half the lock TTL) before the page's
// transaction: "already paid" skips the order (RunStats.TradePaid), an error
// leaves it for the next pass (RunStats.TradeErrors); see payment.go and
// payment.HTTPTradeCloser for the contract. Off by default, at no cost.
//
// A payment that loses to the close is recorded as a refund owed by
// package payment; package refunds lists them.
//
// With CloserConfig.Compensation = CompensateOutbox, the close transaction
// leaves local stock and coupons alone and writes stock.release and
// coupon.restore events into order_outbox instead (outbox.go, through
// outbox.Insert); package outbox delivers them after commit and shows them
// to operators.
package orders
