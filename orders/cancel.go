package orders

import (
	"context"
	"errors"
	"time"

	"github.com/orderjob/executor/orders/orderlock"
)

// This file holds how long the close path works once its context is
// cancelled: a page in progress finishes within its lease (nothing can
// commit after it), and callers that bound their own work (the delayed-task
// dispatcher's running timeout) count CancelBound in.

// pageGrace is what a page's work may take past the end of its lease:
// noticing that it ended, and writing the dead letters of orders whose
// close failed just before.
const pageGrace = 3 * time.Second

// pageCtx is the context of a page's work (or one CloseOrder's) once its
// locks are taken: without the caller's cancellation, so that the page
// finishes whole (its transaction commits or rolls back, its dead letters
// are written), but ending pageGrace after the lease, since nothing can
// commit after it anyway.
func (c *Closer) pageCtx(ctx context.Context, lease *orderlock.Lease) (context.Context, context.CancelFunc) {
	until := lease.Until()
	if until.IsZero() {
		until = time.Now()
	}
	return context.WithDeadline(context.WithoutCancel(ctx), until.Add(pageGrace))
}

// pageTimeout bounds the work of one page, or one CloseOrder, from the start
// of its lock acquisition to its locks' release.
func (c *Closer) pageTimeout() time.Duration {
	return c.locker.TTL() + 2*c.locker.Timeout() + pageGrace
}

// CancelBound is the longest Run, CloseOrder and CloseOrders go on after
// their context is cancelled: the page whose locks are being taken or held
// then is finished (see pageCtx) and its locks released, and nothing starts
// after it. It is lock TTL + 2 × the lock call timeout + 3s (10s TTL: 14s).
// A caller that must not outlive a bound of its own (the delayed-task
// dispatcher: handler timeout + this, within its running timeout) counts
// this in.
func (c *Closer) CancelBound() time.Duration { return c.pageTimeout() }

// leaseRanOut reports a close transaction that failed because the lease
// ended: refused before commit (ErrLeaseExpired), or cut by the page's
// deadline after the lease was over.
func leaseRanOut(err error, lease *orderlock.Lease) bool {
	return errors.Is(err, ErrLeaseExpired) || (errors.Is(err, context.DeadlineExceeded) && !lease.ValidFor(0))
}
