package deadletters_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/oplist"
)

// A bulk requeue moves exactly the letters its filter selects, reports how
// many, and a dry run changes nothing.
func TestRequeueMatching(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.db.ExecContext(b.ctx, `INSERT INTO order_dead_letter
		(order_no, stage, status, status_reason, last_error, attempts, next_retry_at, updated_at) VALUES
		('P-1', 'close', 'parked', 'parked after 8', 'log 1 closes: Table ''x.order_close_log'' doesn''t exist', 8, NOW(3), NOW(3) - INTERVAL 3 HOUR),
		('P-2', 'close', 'parked', 'parked after 8', 'log 1 closes: Table ''x.order_close_log'' doesn''t exist', 8, NOW(3), NOW(3) - INTERVAL 30 MINUTE),
		('P-3', 'close', 'parked', 'parked after 8', 'close order P-3: inventory row of sku 5 is missing', 8, NOW(3), NOW(3) - INTERVAL 10 MINUTE),
		('P-4', 'payment', 'parked', 'parked after 8', 'order_close_log', 8, NOW(3), NOW(3)),
		('W-1', 'close', 'waiting', '', 'log 1 closes: Table ''x.order_close_log'' doesn''t exist', 2, NOW(3) + INTERVAL 1 HOUR, NOW(3)),
		('R-1', 'close', 'resolved', 'closed', 'log 1 closes: Table ''x.order_close_log'' doesn''t exist', 1, NOW(3), NOW(3))`)
	require.NoError(t, err)
	d := deadletters.New(b.db.DB)
	status := func(no, stage string) string {
		dl, err := d.Get(b.ctx, no, stage)
		require.NoError(t, err)
		return dl.Status
	}

	res, err := d.RequeueMatching(b.ctx, deadletters.RequeueFilter{Status: "parked", ErrorLike: "order_close_log", DryRun: true})
	require.NoError(t, err)
	require.Equal(t, deadletters.RequeueResult{Matched: 2, DryRun: true}, res)
	require.Equal(t, "parked", status("P-1", ""), "a dry run changes nothing")

	res, err = d.RequeueMatching(b.ctx, deadletters.RequeueFilter{Status: "parked", ErrorLike: "close_log", SinceAgo: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, res.Matched)
	require.Equal(t, 1, res.Requeued)
	require.NotEmpty(t, res.Since)
	require.Equal(t, "waiting", status("P-2", ""))
	require.Equal(t, "parked", status("P-1", ""), "changed before -since")
	dl, err := d.Get(b.ctx, "P-2", "")
	require.NoError(t, err)
	require.Empty(t, dl.StatusReason)
	require.Equal(t, 8, dl.Attempts, "attempts are kept")
	require.WithinDuration(t, b.db.Now(t), dl.NextRetryAt, 5*time.Second, "due now")

	// Everything parked of the close stage, by wildcard; never another
	// stage's letters, never resolved ones.
	res, err = d.RequeueMatching(b.ctx, deadletters.RequeueFilter{Status: "parked", ErrorLike: "%exist%"})
	require.NoError(t, err)
	require.Equal(t, deadletters.RequeueResult{Matched: 1, Requeued: 1}, res)
	res, err = d.RequeueMatching(b.ctx, deadletters.RequeueFilter{Status: "parked"})
	require.NoError(t, err)
	require.Equal(t, deadletters.RequeueResult{Matched: 1, Requeued: 1}, res)
	require.Equal(t, "waiting", status("P-3", ""))
	require.Equal(t, "parked", status("P-4", "payment"))
	require.Equal(t, "resolved", status("R-1", ""))

	// Waiting letters are made due now.
	res, err = d.RequeueMatching(b.ctx, deadletters.RequeueFilter{Status: "waiting", ErrorLike: "order_close_log", Since: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	require.Equal(t, 3, res.Matched) // W-1, and P-1, P-2 requeued above
	require.Equal(t, 3, res.Requeued)
	dl, err = d.Get(b.ctx, "W-1", "")
	require.NoError(t, err)
	require.WithinDuration(t, b.db.Now(t), dl.NextRetryAt, 5*time.Second)

	for _, f := range []deadletters.RequeueFilter{
		{}, {Status: "resolved"}, {Status: "parked", SinceAgo: -time.Second},
		{Status: "parked", SinceAgo: time.Hour, Since: time.Now()}, {Status: "parked", ErrorLike: string(make([]byte, 201))},
	} {
		_, err := d.RequeueMatching(b.ctx, f)
		var inv *oplist.InvalidInputError
		require.True(t, errors.As(err, &inv), "%+v: %v", f, err)
	}
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"90m": 90 * time.Minute, "6h": 6 * time.Hour, "7d": 7 * 24 * time.Hour} {
		at, ago, err := deadletters.ParseSince(in)
		require.NoError(t, err)
		require.True(t, at.IsZero())
		require.Equal(t, want, ago, in)
	}
	for in, want := range map[string]time.Time{
		"2026-12-01 10:00:00":     time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		"2026-12-01T10:00":        time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		"2026-12-01":              time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		"2026-12-01T10:00:00.250": time.Date(2026, 12, 1, 10, 0, 0, 250e6, time.UTC),
	} {
		at, ago, err := deadletters.ParseSince(in)
		require.NoError(t, err)
		require.Zero(t, ago)
		require.Equal(t, want, at, in)
	}
	for _, bad := range []string{"yesterday", "-5m", "0s", "2026-13-01"} {
		_, _, err := deadletters.ParseSince(bad)
		require.Error(t, err, bad)
	}
	// Out of range: named, never wrapped round (999999999d overflowed a
	// Duration into "is negative") or sent to MariaDB (year 0000).
	for in, want := range map[string]string{
		"999999999d":          `since "999999999d" is more than 36524 days back`,
		"36525d":              `since "36525d" is more than 36524 days back`,
		"2562047h":            `since "2562047h" is more than 36524 days back`,
		"0000-01-01":          "since 0000-01-01 is outside the years 1000-9999",
		"0999-12-31 23:59:59": "since 0999-12-31 is outside the years 1000-9999",
	} {
		_, _, err := deadletters.ParseSince(in)
		var inv *oplist.InvalidInputError
		require.ErrorAs(t, err, &inv, in)
		require.Equal(t, "since", inv.Field, in)
		require.Equal(t, want, inv.Msg, in)
	}
	_, ago, err := deadletters.ParseSince("36524d")
	require.NoError(t, err)
	require.Equal(t, 36524*24*time.Hour, ago)
	_, _, err = deadletters.ParseTimeOrAgo("until", "0000-01-01")
	require.EqualError(t, err, "until 0000-01-01 is outside the years 1000-9999")
}
