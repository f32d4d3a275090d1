package deadletters

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// countCap is what the order view counts letters up to (inspect.CountCap).
const countCap = 10000

// TestHotStatementPlans runs every statement of the package through
// plantest.Check (see orders' TestHotStatementPlans): with the statistics as
// the load left them and with statistics that lie, each must keep its plan
// and read at most about 3 rows or index entries per letter it handles.
func TestHotStatementPlans(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t)
	q := plantest.Q
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	uses := plantest.Uses
	plantest.Check(t, f.db.DB, []string{"order_dead_letter"}, []plantest.Statement{
		{Name: "letter by id", Query: q(letterByIDSQL, f.letterID), Units: 1, Plan: plantest.PK("order_dead_letter")},
		{Name: "operator: letter", Query: named(letterSQL, letterParams{OrderNo: f.letterNo, Stage: StageClose}), Units: 1, Plan: plantest.ByKey("order_dead_letter", "uk_order_stage")},
		{Name: "operator: requeue letter", Query: named(requeueLetterSQL, letterParams{OrderNo: f.letterNo, Stage: StageClose}), Units: 1, Plan: plantest.ByKey("order_dead_letter", "uk_order_stage")},
		{Name: "operator: bulk requeue, find", Query: named(matchLettersSQL, letterParams{Status: "parked", Stage: StageClose, Since: sqlexec.Earliest, AfterAt: sqlexec.Earliest, AfterID: -1, Error: "boom", Limit: requeuePage}), Units: len(f.parkedLetters), Plan: uses("order_dead_letter", "idx_status_updated", "range")},
		{Name: "operator: bulk requeue, move", Query: named(fmt.Sprintf(requeueLettersSQL, sqlexec.IntList(f.parkedLetters)), letterParams{Status: "parked", Stage: StageClose, Since: sqlexec.Earliest, Error: "boom"}), Units: len(f.parkedLetters), Plan: plantest.PK("order_dead_letter")},
		{Name: "letters: newest page", Query: named(letterWindowByIDSQL, letterParams{BeforeID: math.MaxInt64, Limit: 51}), Units: 51, Plan: plantest.PK("order_dead_letter")},
		{Name: "letters: stage and error window", Query: named(letterWindowByIDSQL, letterParams{Stage: "payment", Error: "boom", BeforeID: math.MaxInt64, Limit: oplist.SearchWindow}), Units: oplist.SearchWindow, Plan: plantest.PK("order_dead_letter")},
		{Name: "letters: status and time window", Query: named(letterWindowByStatusSQL, letterParams{Error: "boom", Status: Resolved, Since: sqlexec.Earliest, Until: sqlexec.Latest, BeforeAt: sqlexec.Latest, BeforeID: math.MaxInt64, Limit: oplist.SearchWindow}), Units: oplist.SearchWindow, Plan: uses("order_dead_letter", "idx_status_updated", "range")},
		{Name: "letters: page rows", Query: plantest.Lit(lettersByIDSQL, f.parkedLetters), Units: len(f.parkedLetters), Plan: plantest.PK("order_dead_letter")},
		{Name: "letters: of one order", Query: q(lettersOfOrderSQL, f.letterNo), Units: 1, Plan: plantest.ByKey("order_dead_letter", "uk_order_stage")},
		{Name: "letters: count resolved", Query: named(countLettersSQL, letterParams{Status: Resolved, Limit: countCap}), Units: min(f.resolvedLetters, countCap), Plan: uses("order_dead_letter", "idx_status_updated", "ref", "range").And("<derived2>", "", "ALL")},
	})
}

// planFixture is a dead-letter table where resolved letters pile up, with
// a few waiting and parked ones, as a shop's is after a while.
type planFixture struct {
	db              *dbtest.DB
	letterID        int64 // a waiting letter
	letterNo        string
	parkedLetters   []int64
	resolvedLetters int
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	ctx := context.Background()
	f := &planFixture{db: dbtest.New(t)}
	db := f.db
	_, err := db.ExecContext(ctx, `INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at)
		SELECT CONCAT('DEMO', seq), 'close', CASE WHEN seq % 97 = 1 THEN 'waiting' WHEN seq % 97 = 2 THEN 'parked' ELSE 'resolved' END,
		       'close order: boom', 1, NOW(3) - INTERVAL 1 MINUTE
		FROM seq_1_to_20000 WHERE seq % 2 = 1`)
	require.NoError(t, err)
	require.NoError(t, db.GetContext(ctx, &f.letterID, `SELECT MIN(id) FROM order_dead_letter WHERE status = 'waiting'`))
	require.NoError(t, db.GetContext(ctx, &f.letterNo, `SELECT order_no FROM order_dead_letter WHERE status = 'waiting' ORDER BY id LIMIT 1`))
	require.NoError(t, db.SelectContext(ctx, &f.parkedLetters, `SELECT id FROM order_dead_letter WHERE status = 'parked' ORDER BY id`))
	require.NoError(t, db.GetContext(ctx, &f.resolvedLetters, `SELECT COUNT(*) FROM order_dead_letter WHERE status = 'resolved'`))
	return f
}
