package delay

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeOutcome stands in for orders.Outcome (a fmt.Stringer).
type fakeOutcome string

func (o fakeOutcome) String() string { return string(o) }

// fakeCloser closes unpaid orders with a status CAS, like orders.Closer.
type fakeCloser struct {
	mu     sync.Mutex
	status map[string]string // unpaid, paid, closed
	closes atomic.Int64
	calls  atomic.Int64
	result func(orderNo string) (fakeOutcome, error) // overrides, if set
}

func newFakeCloser(unpaid ...string) *fakeCloser {
	f := &fakeCloser{status: map[string]string{}}
	for _, no := range unpaid {
		f.status[no] = "unpaid"
	}
	return f
}

func (f *fakeCloser) CloseOrder(_ context.Context, orderNo string) (fakeOutcome, error) {
	f.calls.Add(1)
	if f.result != nil {
		return f.result(orderNo)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.status[orderNo] {
	case "unpaid":
		f.status[orderNo] = "closed"
		f.closes.Add(1)
		return "closed", nil
	case "paid":
		return "skipped_paid", nil
	case "closed":
		return "skipped_closed", nil
	}
	return "not_found", nil
}

func (f *fakeCloser) pay(orderNo string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[orderNo] = "paid"
}

func TestOrderCloseHandlerMapsOutcomes(t *testing.T) {
	t.Parallel()
	task := func(payload string) *Task { return &Task{Payload: json.RawMessage(payload)} }
	cases := []struct {
		outcome   fakeOutcome
		err       error
		wantErr   bool
		permanent bool
	}{
		{"closed", nil, false, false},
		{"skipped_paid", nil, false, false},
		{"skipped_closed", nil, false, false},
		{"not_due", nil, true, false},
		{"skipped_locked", nil, true, false},
		{"dead_lettered", errors.New("stock row missing"), true, false},
		{"not_found", nil, true, true},
		{"parked", nil, true, true},
		{"", errors.New("db down"), true, false},
	}
	for _, tc := range cases {
		h := OrderCloseHandler(func(context.Context, string) (fakeOutcome, error) { return tc.outcome, tc.err })
		tc2 := &taskCtx{}
		err := h(withTask(context.Background(), tc2), task(`{"orderNo":"X1"}`))
		if !tc.wantErr {
			require.NoError(t, err, tc.outcome)
			require.Equal(t, string(tc.outcome), tc2.getOutcome())
			continue
		}
		require.Error(t, err, tc.outcome)
		var perm *PermanentError
		require.Equal(t, tc.permanent, errors.As(err, &perm), "%s: %v", tc.outcome, err)
	}
	h := OrderCloseHandler(func(context.Context, string) (fakeOutcome, error) { return "closed", nil })
	for _, bad := range []string{`{}`, `[1]`, `{"orderNo":""}`, `null`} {
		var perm *PermanentError
		require.ErrorAs(t, h(context.Background(), task(bad)), &perm, bad)
	}
}

// An order paid before its task fires: the close is a no-op, the task is
// DONE and counted as skipped_paid. (With the real order close:
// TestOrderCloseSkipsPaidOrder.)
func TestOrderPaidBeforeTaskFiresIsSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	closer := newFakeCloser("P1", "P2")
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{OrderTimeoutCloseHandler: OrderCloseHandler(closer.CloseOrder)}))
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
