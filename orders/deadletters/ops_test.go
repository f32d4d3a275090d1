package deadletters_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/oplist"
)

// letterWorld is the operators' view over ordertest.Letters' dead letters,
// one in every status.
func letterWorld(t *testing.T, b *testBundle) *deadletters.Ops {
	t.Helper()
	ordertest.Letters(t, b.db.DB)
	return deadletters.New(b.db.DB)
}

func TestDeadLettersListGetRequeue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := letterWorld(t, b)

	all, err := d.List(b.ctx, deadletters.Filter{})
	require.NoError(t, err)
	require.Len(t, all, 5)
	require.Equal(t, "W-1", all[0].OrderNo, "newest first")
	require.Equal(t, "payment", all[0].Stage)

	waiting, err := d.List(b.ctx, deadletters.Filter{Status: deadletters.Waiting, Stage: deadletters.StageClose})
	require.NoError(t, err)
	require.Equal(t, []string{"W-2", "W-1"}, letterNos(waiting))

	page, err := d.List(b.ctx, deadletters.Filter{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page, 2)
	next, err := d.List(b.ctx, deadletters.Filter{Limit: 2, BeforeID: page[1].ID})
	require.NoError(t, err)
	require.Equal(t, []string{"R-1", "P-1"}, letterNos(next))

	dl, err := d.Get(b.ctx, "P-1", "")
	require.NoError(t, err)
	require.Equal(t, deadletters.Parked, dl.Status)
	require.Equal(t, 8, dl.Attempts)
	require.Contains(t, dl.StatusReason, "parked after 8")
	dl, err = d.Get(b.ctx, "W-1", "payment")
	require.NoError(t, err)
	require.Equal(t, "trade close timed out", dl.LastError)
	_, err = d.Get(b.ctx, "NOPE", "")
	require.ErrorIs(t, err, deadletters.ErrNotFound)

	// Requeue: parked → waiting, due now; attempts and the error kept.
	now := b.db.Now(t)
	dl, err = d.Requeue(b.ctx, "P-1", "close")
	require.NoError(t, err)
	require.Equal(t, deadletters.Waiting, dl.Status)
	require.Equal(t, 8, dl.Attempts)
	require.Equal(t, "boom", dl.LastError)
	require.Empty(t, dl.StatusReason)
	require.WithinDuration(t, now, dl.NextRetryAt, 5*time.Second)
	// A waiting letter due later is brought forward; twice is harmless.
	for range 2 {
		dl, err = d.Requeue(b.ctx, "W-1", "")
		require.NoError(t, err)
		require.Equal(t, deadletters.Waiting, dl.Status)
		require.WithinDuration(t, now, dl.NextRetryAt, 5*time.Second)
	}
	dl, err = d.Requeue(b.ctx, "R-1", "")
	require.ErrorIs(t, err, deadletters.ErrResolved)
	require.Equal(t, "R-1", dl.OrderNo, "the conflict shows the letter")
	require.Equal(t, deadletters.Resolved, b.statusOf(t, "R-1"))
	_, err = d.Requeue(b.ctx, "NOPE", "")
	require.ErrorIs(t, err, deadletters.ErrNotFound)

	// Bad input says which field.
	for _, f := range []deadletters.Filter{{Status: "lost"}, {Limit: 1001}, {Limit: -1}, {BeforeID: -1}, {Stage: strings.Repeat("s", 33)}} {
		_, err := d.List(b.ctx, f)
		var inv *oplist.InvalidInputError
		require.True(t, errors.As(err, &inv), "%+v: %v", f, err)
	}
	_, err = d.Get(b.ctx, strings.Repeat("x", 65), "")
	var inv *oplist.InvalidInputError
	require.True(t, errors.As(err, &inv))
	require.Equal(t, "orderNo", inv.Field)
	_, err = d.Requeue(b.ctx, "", "")
	require.True(t, errors.As(err, &inv))
}

func letterNos(dls []deadletters.Letter) []string {
	out := make([]string, len(dls))
	for i, d := range dls {
		out[i] = d.OrderNo
	}
	return out
}

// The letter's JSON: camelCase keys, times without a zone (they are the
// session's wall clock), and it reads back.
func TestDeadLetterJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 10, 30, 0, 123e6, time.UTC)
	dl := deadletters.Letter{ID: 3, OrderNo: "A-1", OrderTable: "t_order_7", Stage: "close", Status: "parked", StatusReason: "why",
		LastError: "boom", Attempts: 8, NextRetryAt: at, CreatedAt: at, UpdatedAt: at}
	b, err := json.Marshal(dl)
	require.NoError(t, err)
	require.JSONEq(t, `{"id":3,"orderNo":"A-1","orderTable":"t_order_7","stage":"close","status":"parked","statusReason":"why","lastError":"boom",
		"attempts":8,"nextRetryAt":"2026-11-30T10:30:00.123","createdAt":"2026-11-30T10:30:00.123","updatedAt":"2026-11-30T10:30:00.123"}`, string(b))
	var back deadletters.Letter
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, dl, back)
}

// A letter names the order table its order is in (migration 0138) in
// the views and their JSON; a letter written before names none and its
// JSON has no orderTable.
func TestDeadLetterNamesItsTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.db.ExecContext(b.ctx, `INSERT INTO order_dead_letter (order_no, order_table, stage, status, last_error, attempts, next_retry_at)
		VALUES ('T-1', 't_order_3', 'close', 'parked', 'boom', 8, NOW(3)), ('T-2', '', 'close', 'waiting', 'boom', 1, NOW(3))`)
	require.NoError(t, err)
	ops := deadletters.New(b.db.DB)
	dl, err := ops.Get(b.ctx, "T-1", "")
	require.NoError(t, err)
	require.Equal(t, "t_order_3", dl.OrderTable)
	js, err := json.Marshal(dl)
	require.NoError(t, err)
	require.Contains(t, string(js), `"orderTable":"t_order_3"`)
	l, err := ops.List(b.ctx, deadletters.Filter{})
	require.NoError(t, err)
	require.Len(t, l, 2)
	require.Equal(t, []string{"", "t_order_3"}, []string{l[0].OrderTable, l[1].OrderTable})
	js, err = json.Marshal(l[0])
	require.NoError(t, err)
	require.NotContains(t, string(js), "orderTable")
}
