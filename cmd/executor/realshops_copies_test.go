package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
)

// The mall marks the first unused sms_coupon_history row of (member,
// coupon) used when an order takes a coupon, and its cancel gives back
// the first used one: a member's copies of one coupon are
// interchangeable. Declared with coupon.anyCopy, a close gives each order
// one used copy, distinct ones to the orders of one member and coupon,
// lowest id first; without it, several used copies matching an order make
// it a dead letter.

// mallCopies is member 1 holding three copies of coupon 999: one used by a
// paid order (placed first: its copy has the lowest id), two by due
// orders, which the racing payers leave alone so that both close.
var mallCopies = []shopOrder{
	{sn: "C0", user: 1, kind: kindPaid, coupon: 999, items: []shopItem{{sku: 3, qty: 1}}},
	{sn: "C1", user: 1, kind: kindDue, coupon: 999, items: []shopItem{{sku: 1, qty: 1}}, unpayable: true},
	{sn: "C2", user: 1, kind: kindDue, coupon: 999, items: []shopItem{{sku: 2, qty: 2}}, unpayable: true},
}

// mallCopiesDB is the mall's tables (realShopDB) with its stock and
// members, and os placed with the mall's statements, due unless not due;
// env gets set.
func mallCopiesDB(t *testing.T, set map[string]string, os ...shopOrder) (*dbtest.DB, map[string]string, string) {
	t.Helper()
	db, env, file := realShopDB(t, mallShop)
	for k, v := range set {
		env[k] = v
	}
	ctx := context.Background()
	for _, s := range mallShop.seed {
		_, err := db.ExecContext(ctx, s)
		require.NoError(t, err, s)
	}
	tx, err := db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	for _, o := range os {
		age := 3 * time.Hour
		if o.kind == kindNotDue {
			age = time.Minute
		}
		require.NoError(t, mallShop.place(ctx, tx, &o, age), o.sn)
	}
	require.NoError(t, tx.Commit())
	return db, env, file
}

// usedCopies are the ids of member's used copies of coupon, ascending.
func usedCopies(t *testing.T, db *dbtest.DB, member, coupon int64) []int64 {
	t.Helper()
	ids := []int64{}
	require.NoError(t, db.Select(&ids, `SELECT id FROM sms_coupon_history WHERE member_id = ? AND coupon_id = ? AND use_status = 1
		ORDER BY id`, member, coupon))
	return ids
}

// runStats is the counters of a run's result line.
func runStats(t *testing.T, out string) map[string]int {
	t.Helper()
	m := regexp.MustCompile(`scanned=(\d+) closed=(\d+) skipped_paid=\d+ skipped_locked=\d+ dead_lettered=(\d+)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	st := map[string]int{}
	for i, k := range []string{"scanned", "closed", "dead_lettered"} {
		st[k], _ = strconv.Atoi(m[1+i])
	}
	return st
}

// mallOrderStatus is the status of the mall order sn.
func mallOrderStatus(t *testing.T, db *dbtest.DB, sn string) int {
	t.Helper()
	return db.Count(t, `SELECT status FROM oms_order WHERE order_sn = ?`, sn)
}

// Without anyCopy (today's rule: exactly one used row per order), each of
// the two due orders matches three used copies: both go to dead letters
// and nothing is given back, whether they close in one page or apart.
func TestMallCouponCopiesWithoutAnyCopyDeadLetter(t *testing.T) {
	for _, pageSize := range []int{1, 10} {
		t.Run(fmt.Sprintf("pageSize=%d", pageSize), func(t *testing.T) {
			db, env, file := mallCopiesDB(t, map[string]string{"ORDER_SCHEMA_COUPON_ANY_COPY": "false"}, mallCopies...)
			code, out, errOut := runCLI(t, env, "-config", file, "run", "orderTimeoutCloseJob", "-param", fmt.Sprintf("pageSize=%d", pageSize))
			require.Equal(t, 1, code, "a run that dead-letters fails: "+out+errOut)
			require.Equal(t, map[string]int{"scanned": 2, "closed": 0, "dead_lettered": 2}, runStats(t, out))
			require.Equal(t, []int64{1, 2, 3}, usedCopies(t, db, 1, 999))
			require.Equal(t, 2, db.Count(t, `SELECT COUNT(*) FROM order_dead_letter
				WHERE last_error LIKE '%3 used rows of sms\_coupon\_history match the order, not one%'`))
			for _, sn := range []string{"C1", "C2"} {
				require.Equal(t, 0, mallOrderStatus(t, db, sn), sn)
			}
		})
	}
}

// With anyCopy the two due orders close and give back one copy each: the
// two lowest ids (the paid order's among them: copies are
// interchangeable), so the member's used copies fall by exactly two. In
// one page (the page's close assigns distinct copies) or a page each; a
// second run changes nothing.
func TestMallCouponCopiesGoBackOncePerOrder(t *testing.T) {
	for _, pageSize := range []int{1, 10} {
		t.Run(fmt.Sprintf("pageSize=%d", pageSize), func(t *testing.T) {
			db, env, file := mallCopiesDB(t, nil, mallCopies...)
			code, out, errOut := runCLI(t, env, "-config", file, "run", "orderTimeoutCloseJob", "-param", fmt.Sprintf("pageSize=%d", pageSize))
			require.Equal(t, 0, code, out+errOut)
			require.Equal(t, map[string]int{"scanned": 2, "closed": 2, "dead_lettered": 0}, runStats(t, out))
			require.Equal(t, []int64{3}, usedCopies(t, db, 1, 999), "the two lowest copies given back")
			for sn, want := range map[string]int{"C0": 1, "C1": 4, "C2": 4} {
				require.Equal(t, want, mallOrderStatus(t, db, sn), sn)
			}

			code, out, errOut = runCLI(t, env, "-config", file, "run", "orderTimeoutCloseJob", "-param", fmt.Sprintf("pageSize=%d", pageSize))
			require.Equal(t, 0, code, out+errOut)
			require.Equal(t, map[string]int{"scanned": 0, "closed": 0, "dead_lettered": 0}, runStats(t, out))
			require.Equal(t, []int64{3}, usedCopies(t, db, 1, 999))
			require.Zero(t, db.Count(t, `SELECT COUNT(*) FROM order_dead_letter`))
		})
	}
}

// Fewer used copies than orders (one of member 2's two copies given back
// by hand): the page's close finds no copy for the second order and falls
// back to the checked close, which closes the first with the copy and sets
// the second aside; closed alone it matches no used copy and goes to a
// dead letter, or with coupon.optional closes without a coupon.
func TestMallCouponCopiesFewerThanOrders(t *testing.T) {
	orders := []shopOrder{
		{sn: "D1", user: 2, kind: kindDue, coupon: 998, items: []shopItem{{sku: 1, qty: 1}}},
		{sn: "D2", user: 2, kind: kindDue, coupon: 998, items: []shopItem{{sku: 2, qty: 1}}},
	}
	for _, optional := range []bool{false, true} {
		for _, pageSize := range []int{1, 10} {
			t.Run(fmt.Sprintf("optional=%v,pageSize=%d", optional, pageSize), func(t *testing.T) {
				db, env, file := mallCopiesDB(t, map[string]string{"ORDER_SCHEMA_COUPON_OPTIONAL": strconv.FormatBool(optional)}, orders...)
				_, err := db.ExecContext(context.Background(), `UPDATE sms_coupon_history SET use_status = 0 WHERE id = 2`)
				require.NoError(t, err)
				code, out, errOut := runCLI(t, env, "-config", file, "run", "orderTimeoutCloseJob", "-param", fmt.Sprintf("pageSize=%d", pageSize))
				if !optional {
					code-- // a run that dead-letters fails
				}
				require.Equal(t, 0, code, out+errOut)
				require.Empty(t, usedCopies(t, db, 2, 998), "the one copy given back")
				require.Equal(t, 4, mallOrderStatus(t, db, "D1"))
				if optional {
					require.Equal(t, map[string]int{"scanned": 2, "closed": 2, "dead_lettered": 0}, runStats(t, out))
					require.Equal(t, 4, mallOrderStatus(t, db, "D2"), "closed without a coupon")
					return
				}
				require.Equal(t, map[string]int{"scanned": 2, "closed": 1, "dead_lettered": 1}, runStats(t, out))
				require.Equal(t, 0, mallOrderStatus(t, db, "D2"))
				require.Equal(t, 1, db.Count(t, `SELECT COUNT(*) FROM order_dead_letter
					WHERE order_no = 'D2' AND last_error LIKE '%0 used rows of sms\_coupon\_history match the order%'`))
			})
		}
	}
}

// Two executors closing one member's orders at once, in pages of 2 and
// 3: every due order closes once and gives back one copy, the lowest
// used at its close, so the copies left used are the highest ids: the
// paid orders' count.
func TestMallCouponCopiesTwoExecutors(t *testing.T) {
	const due, paid = 12, 2
	var orders []shopOrder
	for i := range due + paid {
		o := shopOrder{sn: fmt.Sprintf("E%02d", i), user: 3, kind: kindDue, coupon: 997, items: []shopItem{{sku: int64(1 + i%12), qty: 1}}}
		if i%7 == 3 {
			o.kind = kindPaid
		}
		orders = append(orders, o)
	}
	db, env, file := mallCopiesDB(t, nil, orders...)
	for k, v := range env {
		t.Setenv(k, v)
	}
	outs := make([]bytes.Buffer, 2)
	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i, pageSize := range []int{2, 3} {
		wg.Go(func() {
			var errOut bytes.Buffer
			codes[i] = run(context.Background(), []string{"-config", file, "run", "orderTimeoutCloseJob", "-param",
				fmt.Sprintf("pageSize=%d,maxPerSecond=20", pageSize)}, &outs[i], &errOut)
			outs[i].WriteString(errOut.String())
		})
	}
	wg.Wait()
	closed, dead := 0, 0
	for i := range outs {
		require.Equal(t, 0, codes[i], outs[i].String())
		st := runStats(t, outs[i].String())
		closed += st["closed"]
		dead += st["dead_lettered"]
	}
	t.Logf("closed by each executor: %v, %v", runStats(t, outs[0].String())["closed"], runStats(t, outs[1].String())["closed"])
	require.Equal(t, due, closed)
	require.Zero(t, dead)
	require.Equal(t, due, db.Count(t, `SELECT COUNT(*) FROM order_close_log`))
	require.Equal(t, []int64{due + 1, due + 2}, usedCopies(t, db, 3, 997), "one copy given back per closed order")
}
