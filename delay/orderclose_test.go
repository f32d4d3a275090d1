package delay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeCloser closes unpaid orders with a status CAS, as the real order
// close does (its handler, tested with the real close, is in package
// handlers).
type fakeCloser struct {
	mu     sync.Mutex
	status map[string]string // unpaid, paid, closed
	closes atomic.Int64
	calls  atomic.Int64
}

func newFakeCloser(unpaid ...string) *fakeCloser {
	f := &fakeCloser{status: map[string]string{}}
	for _, no := range unpaid {
		f.status[no] = "unpaid"
	}
	return f
}

func (f *fakeCloser) CloseOrder(_ context.Context, orderNo string) string {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.status[orderNo] {
	case "unpaid":
		f.status[orderNo] = "closed"
		f.closes.Add(1)
		return "closed"
	case "paid":
		return "skipped_paid"
	case "closed":
		return "skipped_closed"
	}
	return "not_found"
}

// handler is the fake's orderTimeoutClose handler: the task is done with
// the outcome reported, FAILED for an order it does not know.
func (f *fakeCloser) handler() HandlerFunc {
	return func(ctx context.Context, t *Task) error {
		var p OrderTimeoutPayload
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return Permanent(err)
		}
		out := f.CloseOrder(ctx, p.OrderNo)
		if out == "not_found" {
			return Permanent(fmt.Errorf("order %s not found", p.OrderNo))
		}
		ReportOutcome(ctx, out)
		return nil
	}
}

func (f *fakeCloser) pay(orderNo string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[orderNo] = "paid"
}

// An order paid before its task fires: the close is a no-op, the task is
// DONE and counted as skipped_paid. (With the real order close:
// handlers' TestDelayOrderCloseClosesAndSkipsPaidOrder.)
func TestOrderPaidBeforeTaskFiresIsSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	closer := newFakeCloser("P1", "P2")
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{OrderTimeoutCloseHandler: closer.handler()}))
	start(t, d)
	ctx := context.Background()
	for _, no := range []string{"P1", "P2"} {
		_, _, err := d.Client().Register(ctx, OrderTimeoutClose(no, time.Now().Add(300*time.Millisecond)))
		require.NoError(t, err)
	}
	closer.pay("P1")
	b.waitStatus(t, "order-timeout-P1", StatusDone)
	b.waitStatus(t, "order-timeout-P2", StatusDone)
	require.EqualValues(t, 1, closer.closes.Load())
	waitCounters(t, d, func(c Counters) bool { return c.Outcomes["skipped_paid"] == 1 && c.Outcomes["closed"] == 1 })
}
