package orders_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
)

// TestDeadLetterClaimAcrossDSTChanges: a dead-letter retry's claim holds
// for its real length when the session zone (Europe/Berlin) changes within
// it. Each run sees the server's clock fixed at a chosen instant (the
// session's timestamp variable), so NOW() and UTC_TIMESTAMP() read what
// they would read then. The letter's order, placed today, is not due at
// those instants: the replay leaves the letter claimed (Skipped), and the
// next run finds it (Found) only once the claim has ended.
//
// Spring: a claim taken 5s before 02:00 CET, when clocks jump to 03:00
// CEST, must still hold 3s after the jump, although its end on the run's
// wall clock (02:00:09) never comes and 03:00:03 is past it; it ends 14s
// after it began, not an hour later. Autumn: a claim taken 5s before 03:00
// CEST, when clocks go back to 02:00 CET, must hold 2s later, although the
// instant of its end reads 02:00:09 on the wall clock, before the 02:59:57
// of that run.
func TestDeadLetterClaimAcrossDSTChanges(t *testing.T) {
	t.Parallel()
	e := epochShops[3]
	b := epochSetup(t, berlin(t), "epoch_claim_dst", e, orders.CloserConfig{})
	ttl := b.Closer.CancelBound() // the claim's length
	require.Equal(t, 14*time.Second, ttl)
	b.placeEpoch(t, e, ordertest.ForeignOpts{OrderSn: "L-1", Items: []ordertest.Item{{SKU: 1, Qty: 1}}}, b.utcNow(t), time.Minute, nil, 15)

	// at is a Closer whose database clock stands still at instant at.
	at := func(at time.Time) *orders.Closer {
		db, err := sqlx.Open("mysql", b.DB.DSN+"&timestamp="+strconv.FormatInt(at.Unix(), 10))
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		c, err := orders.NewCloser(db, b.Locker, orders.CloserConfig{Schema: e.schema()})
		require.NoError(t, err)
		return c
	}
	found := func(c *orders.Closer) int {
		t.Helper()
		st, err := c.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
		require.NoError(t, err)
		require.Equal(t, st.Found, st.Skipped, "the order is not due: the letter is left claimed: %s", st)
		return st.Found
	}
	for _, change := range []struct {
		name string
		at   time.Time // the change, 01:00 UTC
	}{
		{"spring", time.Date(2026, time.March, 29, 1, 0, 0, 0, time.UTC)},
		{"autumn", time.Date(2026, time.October, 25, 1, 0, 0, 0, time.UTC)},
	} {
		_, err := b.DB.Exec(`DELETE FROM order_dead_letter`)
		require.NoError(t, err)
		_, err = b.DB.Exec(`INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at, order_table)
			VALUES ('L-1', 'close', 'waiting', 'old failure', 1, ?, 't_order')`, change.at.Add(-2*time.Hour))
		require.NoError(t, err)
		claimed := change.at.Add(-5 * time.Second)
		require.Equal(t, 1, found(at(claimed)), "%s: the letter is due before the change", change.name)
		var end string
		require.NoError(t, b.DB.Get(&end, `SELECT CAST(next_retry_at AS CHAR) FROM order_dead_letter WHERE order_no = 'L-1'`))
		for _, later := range []time.Duration{2 * time.Second, 8 * time.Second} { // before the change, after it
			require.Zero(t, found(at(claimed.Add(later))),
				"%s: the claim taken at %s (till %s on the wall clock) holds %s later", change.name, claimed, end, later)
		}
		if change.name == "spring" {
			require.Equal(t, 1, found(at(claimed.Add(ttl+time.Second))), "spring: the claim ends after its length, not an hour later")
		}
	}
}
