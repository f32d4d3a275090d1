package orders

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
)

// TestDeadLetterScheduleMatchesBackoff: the next_retry_at the upsert
// statement computes after each failure is the dead-letter schedule's step
// for that attempt, up to and past its cap.
func TestDeadLetterScheduleMatchesBackoff(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	b, err := DeadLetterBackoff{Base: 90 * time.Second, Max: 6 * time.Hour}.withDefaults()
	require.NoError(t, err)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for attempts := 1; attempts <= 12; attempts++ {
		require.NoError(t, store{}.upsertDeadLetter(ctx, db, "order_info", "SCHED-1", "boom", now, b))
		var row struct {
			Attempts int       `db:"attempts"`
			Next     time.Time `db:"next_retry_at"`
		}
		require.NoError(t, db.GetContext(ctx, &row,
			`SELECT attempts, next_retry_at FROM order_dead_letter WHERE order_no = 'SCHED-1' AND stage = 'close'`))
		require.Equal(t, attempts, row.Attempts)
		require.Equal(t, b.schedule().Step(attempts), row.Next.Sub(now), "wait after failure %d", attempts)
	}
}
