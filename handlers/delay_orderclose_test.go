package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders"
)

// Each outcome of CloseOrder becomes its task's result: success, not now
// (no retry spent), a failure to retry, or FAILED at once. (That the
// successful ones are counted by name is checked with a dispatcher, in
// TestDelayOrderCloseClosesAndSkipsPaidOrder.)
func TestDelayOrderCloseMapsOutcomes(t *testing.T) {
	t.Parallel()
	task := func(payload string) *delay.Task { return &delay.Task{Payload: json.RawMessage(payload)} }
	cases := []struct {
		outcome   orders.Outcome
		err       error
		wantErr   bool
		permanent bool
		notNow    bool
	}{
		{orders.OutcomeClosed, nil, false, false, false},
		{orders.OutcomeSkippedPaid, nil, false, false, false},
		{orders.OutcomeSkippedClosed, nil, false, false, false},
		{orders.OutcomeNotDue, nil, true, false, true},
		{orders.OutcomeSkippedLocked, nil, true, false, true},
		{orders.OutcomeDeadLettered, errors.New("stock row missing"), true, false, false},
		{orders.OutcomeNotFound, nil, true, true, false},
		{orders.OutcomeParked, nil, true, true, false},
		{0, errors.New("db down"), true, false, true},
	}
	for _, tc := range cases {
		h := DelayOrderClose(func(context.Context, string) (orders.Outcome, error) { return tc.outcome, tc.err })
		err := h(context.Background(), task(`{"orderNo":"X1"}`))
		if !tc.wantErr {
			require.NoError(t, err, tc.outcome)
			continue
		}
		require.Error(t, err, tc.outcome)
		var perm *delay.PermanentError
		require.Equal(t, tc.permanent, errors.As(err, &perm), "%s: %v", tc.outcome, err)
		var notNow *delay.NotNowError
		require.Equal(t, tc.notNow, errors.As(err, &notNow), "%s: %v", tc.outcome, err)
	}
	h := DelayOrderClose(func(context.Context, string) (orders.Outcome, error) { return orders.OutcomeClosed, nil })
	for _, bad := range []string{`{}`, `[1]`, `{"orderNo":""}`, `null`} {
		var perm *delay.PermanentError
		require.ErrorAs(t, h(context.Background(), task(bad)), &perm, bad)
	}
}

// The batch handler sends the tasks' order numbers in task order (a task
// whose payload does not parse FAILS without being sent) and maps each
// result as the single handler does; a not-due order is moved to its
// deadline. A failure of the whole batch, or a wrong number of results,
// makes every task "not now".
func TestDelayOrderCloseBatchMapsOutcomes(t *testing.T) {
	t.Parallel()
	results := map[string]orders.Result{
		"C": {Outcome: orders.OutcomeClosed}, "P": {Outcome: orders.OutcomeSkippedPaid}, "S": {Outcome: orders.OutcomeSkippedClosed},
		"N": {Outcome: orders.OutcomeNotDue, DueIn: time.Minute}, "L": {Outcome: orders.OutcomeSkippedLocked},
		"D": {Outcome: orders.OutcomeDeadLettered}, "F": {Outcome: orders.OutcomeNotFound}, "K": {Outcome: orders.OutcomeParked},
	}
	var gotNos []string
	h := DelayOrderCloseBatch(func(ctx context.Context, nos []string) ([]orders.Result, error) {
		gotNos = nos
		out := make([]orders.Result, len(nos))
		for i, no := range nos {
			out[i] = results[no]
		}
		return out, nil
	})
	var tasks []*delay.Task
	for i, no := range []string{"C", "P", "S", "N", "L", "D", "F", "K"} {
		tasks = append(tasks, &delay.Task{ID: int64(i + 1), TraceID: "trace-" + no, Payload: json.RawMessage(`{"orderNo":"` + no + `"}`)})
	}
	tasks = append(tasks, &delay.Task{ID: 100, Payload: json.RawMessage(`{}`)})
	ctx := context.Background()
	errs := h(ctx, tasks)
	require.Len(t, errs, len(tasks))
	require.Equal(t, []string{"C", "P", "S", "N", "L", "D", "F", "K"}, gotNos, "in task order, the bad payload left out")
	for i, want := range []struct {
		ok, permanent bool
		contains      string
	}{
		{ok: true}, {ok: true}, {ok: true},
		{contains: "not due yet"}, {contains: "locked by another close"}, {contains: "dead-lettered"},
		{permanent: true, contains: "not found"}, {permanent: true, contains: "parked"},
		{permanent: true, contains: "orderNo"},
	} {
		if want.ok {
			require.NoError(t, errs[i])
			continue
		}
		require.ErrorContains(t, errs[i], want.contains)
		var perm *delay.PermanentError
		require.Equal(t, want.permanent, errors.As(errs[i], &perm), "%d: %v", i, errs[i])
	}
	var notDue *delay.NotDueError
	require.ErrorAs(t, errs[3], &notDue, "the batch's result tells the deadline")

	// A failure of the whole batch: every task retries with it.
	failing := DelayOrderCloseBatch(func(context.Context, []string) ([]orders.Result, error) {
		return nil, errors.New("db down")
	})
	for _, err := range failing(ctx, tasks[:3]) {
		require.ErrorContains(t, err, "db down")
		var perm *delay.PermanentError
		require.False(t, errors.As(err, &perm))
	}
	short := DelayOrderCloseBatch(func(context.Context, []string) ([]orders.Result, error) {
		return []orders.Result{{Outcome: orders.OutcomeClosed}}, nil
	})
	for _, err := range short(ctx, tasks[:3]) {
		require.ErrorContains(t, err, "1 outcomes for 3 orders")
	}
}
