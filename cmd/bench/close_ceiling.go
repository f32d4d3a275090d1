package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/sqlexec"
)

// The no-lock ceiling: the close work itself, as fast as this server does
// it, for ours to be measured against. Batches of up to a page of due orders
// are claimed with FOR UPDATE SKIP LOCKED (READ COMMITTED, so a claim locks
// only what it returns), closed with one multi-row status CAS, their stock
// given back with one statement (deltas summed per SKU, in sku_id order),
// their coupons with one and their close logged with one, then committed.
// No Redis lock, no dead letters, no per-order fallback: a batch that does
// not change exactly the rows it claimed fails the measurement. Its SQL
// lives here, not in package orders: it is a yardstick, not a close path.
const (
	// ceilingClaimSQL: params cursor create_time (twice), cursor id, now
	// (index range bound), now (due), limit.
	ceilingClaimSQL = `
SELECT id, order_no, create_time, coupon_id FROM order_info FORCE INDEX (idx_status_create_time)
WHERE status = 0 AND (create_time > ? OR (create_time = ? AND id > ?))
  AND create_time <= ? AND create_time + INTERVAL timeout_minutes MINUTE <= ?
ORDER BY create_time, id LIMIT ? FOR UPDATE SKIP LOCKED`
	ceilingItemsSQL  = `SELECT sku_id, quantity FROM order_item FORCE INDEX (idx_order_no) WHERE order_no IN (?)`
	ceilingCloseSQL  = `UPDATE order_info FORCE INDEX (PRIMARY) SET status = 2, close_time = ?, close_reason = 'payment_timeout' WHERE id IN (%s) AND status = 0`
	ceilingStockSQL  = `UPDATE inventory SET available = available + %[1]s, locked = locked - %[1]s WHERE sku_id IN (%[2]s) AND locked >= %[1]s`
	ceilingCouponSQL = `UPDATE user_coupon SET status = 0, order_no = NULL WHERE id IN (%s) AND status = 1`
	ceilingLogSQL    = `INSERT INTO order_close_log (order_no, closed_at, reason) VALUES `
)

// ceilingClose drains db with workers concurrent claimers and returns the
// orders closed and the time taken.
func ceilingClose(ctx context.Context, db *sqlx.DB, workers, pageSize int) (int, time.Duration, error) {
	var now time.Time
	if err := db.GetContext(ctx, &now, `SELECT NOW(3)`); err != nil {
		return 0, 0, err
	}
	closed := make([]int, workers)
	var g errgroup.Group
	start := time.Now()
	for w := range workers {
		g.Go(func() error {
			// Each claimer walks the range from its own cursor: rows it
			// skipped were held by another claimer, which closes them or,
			// rolled back, claims them again from its own cursor.
			cur := ceilingCursor{CreateTime: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), ID: -1}
			for ctx.Err() == nil {
				n, next, err := ceilingBatch(ctx, db, now, cur, pageSize)
				var me *mysql.MySQLError
				if errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) {
					continue // deadlock or lock wait: the same claim again
				}
				if err != nil {
					return err
				}
				if n == 0 {
					return nil
				}
				closed[w] += n
				cur = next
			}
			return ctx.Err()
		})
	}
	err := g.Wait()
	total := 0
	for _, n := range closed {
		total += n
	}
	return total, time.Since(start), err
}

type ceilingCursor struct {
	CreateTime time.Time
	ID         int64
}

// ceilingBatch claims and closes one batch in one transaction.
func ceilingBatch(ctx context.Context, db *sqlx.DB, now time.Time, cur ceilingCursor, limit int) (int, ceilingCursor, error) {
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, cur, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	var claimed []struct {
		ID         int64         `db:"id"`
		OrderNo    string        `db:"order_no"`
		CreateTime time.Time     `db:"create_time"`
		CouponID   sql.NullInt64 `db:"coupon_id"`
	}
	if err := tx.SelectContext(ctx, &claimed, ceilingClaimSQL, cur.CreateTime, cur.CreateTime, cur.ID, now, now, limit); err != nil {
		return 0, cur, fmt.Errorf("ceiling: claim: %w", err)
	}
	if len(claimed) == 0 {
		return 0, cur, nil
	}
	last := claimed[len(claimed)-1]
	next := ceilingCursor{CreateTime: last.CreateTime, ID: last.ID}
	ids := make([]int64, len(claimed))
	nos := make([]string, len(claimed))
	var coupons []int64
	for i, c := range claimed {
		ids[i], nos[i] = c.ID, c.OrderNo
		if c.CouponID.Valid {
			coupons = append(coupons, c.CouponID.Int64)
		}
	}
	slices.Sort(ids)
	slices.Sort(coupons)
	sum, err := ceilingSums(ctx, tx, nos)
	if err != nil {
		return 0, cur, err
	}
	closeTime := now.Add(time.Since(now))
	res, err := tx.ExecContext(ctx, fmt.Sprintf(ceilingCloseSQL, joinInts(ids)), closeTime)
	if err := exactRows("status CAS", len(ids), res, err); err != nil {
		return 0, cur, err
	}
	if err := ceilingRelease(ctx, tx, sum, coupons); err != nil {
		return 0, cur, err
	}
	if err := ceilingLog(ctx, tx, nos, closeTime); err != nil {
		return 0, cur, err
	}
	if err := tx.Commit(); err != nil {
		return 0, cur, err
	}
	return len(claimed), next, nil
}

// ceilingSums sums the units of each SKU the orders nos hold.
func ceilingSums(ctx context.Context, tx *sqlx.Tx, nos []string) (map[int64]int64, error) {
	q, args, err := sqlx.In(ceilingItemsSQL, nos)
	if err != nil {
		return nil, err
	}
	var items []struct {
		SKU int64 `db:"sku_id"`
		Qty int64 `db:"quantity"`
	}
	if err := tx.SelectContext(ctx, &items, q, args...); err != nil {
		return nil, fmt.Errorf("ceiling: items: %w", err)
	}
	sum := map[int64]int64{}
	for _, it := range items {
		sum[it.SKU] += it.Qty
	}
	return sum, nil
}

// exactRows is err, or an error unless the statement changed want rows.
func exactRows(what string, want int, res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("ceiling: %s: %w", what, err)
	}
	if n, _ := res.RowsAffected(); n != int64(want) {
		return fmt.Errorf("ceiling: %s changed %d rows of %d", what, n, want)
	}
	return nil
}

// ceilingRelease gives back the locked stock (sum by SKU) and the coupons.
func ceilingRelease(ctx context.Context, tx *sqlx.Tx, sum map[int64]int64, coupons []int64) error {
	if len(sum) > 0 {
		skus := make([]int64, 0, len(sum))
		for s := range sum {
			skus = append(skus, s)
		}
		slices.Sort(skus)
		res, err := tx.ExecContext(ctx, fmt.Sprintf(ceilingStockSQL, groupedCase(skus, sum), joinInts(skus)))
		if err := exactRows("stock", len(skus), res, err); err != nil {
			return err
		}
	}
	if len(coupons) > 0 {
		res, err := tx.ExecContext(ctx, fmt.Sprintf(ceilingCouponSQL, joinInts(coupons)))
		if err := exactRows("coupons", len(coupons), res, err); err != nil {
			return err
		}
	}
	return nil
}

// ceilingLog writes a close-log row per order.
func ceilingLog(ctx context.Context, tx *sqlx.Tx, nos []string, closeTime time.Time) error {
	query, args := sqlexec.Values(ceilingLogSQL, "(?,?,'payment_timeout')", nos, func(args []any, no string) []any {
		return append(args, no, closeTime)
	})
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("ceiling: close log: %w", err)
	}
	return nil
}

// groupedCase renders `CASE WHEN sku_id IN (...) THEN q ... END` with one
// branch per distinct quantity, the form ours uses too, so that neither
// pays for a CASE of a thousand branches.
func groupedCase(skus []int64, qty map[int64]int64) string {
	byQty := map[int64][]int64{}
	for _, s := range skus {
		byQty[qty[s]] = append(byQty[qty[s]], s)
	}
	var b strings.Builder
	b.WriteString("CASE")
	for _, q := range slices.Sorted(maps.Keys(byQty)) {
		fmt.Fprintf(&b, " WHEN sku_id IN (%s) THEN %d", joinInts(byQty[q]), q)
	}
	b.WriteString(" END")
	return b.String()
}

func joinInts(ids []int64) string {
	b := make([]byte, 0, 8*len(ids))
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

// oursRow drains a fresh copy of the comparison's data with ours and shards
// concurrent runs, and checks the invariants; it returns the row and the
// drain's statement profile (-statements). Each round drains a database of
// its own name, so that the profile is the round's.
func (b *closeBench) oursRow(ctx context.Context, tmplName string, base *ordertest.Baseline, shards, due, round int) (row, string, error) {
	db, name, err := b.dbs.cloneDB(ctx, tmplName, fmt.Sprintf("ours%d_r%d", shards, round))
	if err != nil {
		return row{}, "", err
	}
	r, err := b.ours(ctx, db, shards, due, shards == 1 && b.f.cpuProfile != "")
	if err != nil {
		return row{}, "", err
	}
	prof := b.statementProfile(ctx, name, r.closed)
	r.check = b.check(ctx, db, base, true)
	return r, prof, b.dbs.drop(ctx, name)
}

// ceilingRow drains a fresh copy of the comparison's data with the ceiling
// and checks the invariants and that every due order closed.
// It returns the row and the drain's statement profile (-statements).
func (b *closeBench) ceilingRow(ctx context.Context, tmplName string, base *ordertest.Baseline, workers, due, round int) (row, string, error) {
	db, name, err := b.dbs.cloneDB(ctx, tmplName, fmt.Sprintf("ceiling%d_r%d", workers, round))
	if err != nil {
		return row{}, "", err
	}
	n, el, err := ceilingClose(ctx, db, workers, b.f.pageSize)
	if err != nil {
		return row{}, "", err
	}
	prof := b.statementProfile(ctx, name, n)
	r := row{name: fmt.Sprintf("ceiling, %d worker(s), no lock", workers), closed: n, elapsed: el,
		check: b.check(ctx, db, base, true)}
	if n != due {
		b.failed = append(b.failed, fmt.Sprintf("ceiling with %d worker(s) closed %d of %d due orders", workers, n, due))
	}
	return r, prof, b.dbs.drop(ctx, name)
}

// roundsSummary sets each row's figure (the median of its rounds) in the
// summary, prints the medians and spreads when there were several rounds,
// and ours against the ceiling: 1 shard against 1 worker, and each at its
// best count.
func (b *closeBench) roundsSummary(rounds map[string][]float64) {
	s := b.summary
	keys := slices.Sorted(maps.Keys(rounds))
	for _, k := range keys {
		rs := slices.Sorted(slices.Values(rounds[k]))
		s[k] = rs[len(rs)/2]
		if len(rs)%2 == 0 {
			s[k] = (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
		}
		if b.f.repeat > 1 {
			fmt.Fprintf(b.out, "%-30s median %6.0f/s of %d rounds (min %.0f, max %.0f)\n", k, s[k], len(rs), rs[0], rs[len(rs)-1])
		}
	}
	bestN, best := 0, 0.0
	for _, n := range b.f.shards {
		if r := s[fmt.Sprintf("ours%d", n)]; r > best {
			bestN, best = n, r
		}
	}
	bestW := 0
	for _, w := range b.f.ceiling {
		if r := s[fmt.Sprintf("ceiling%d", w)]; r > s["ceiling_best"] {
			bestW, s["ceiling_best"] = w, r
		}
	}
	if bestW == 0 {
		return
	}
	ratio := func(a, c float64) string {
		if c == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/c)
	}
	fmt.Fprintf(b.out, "ours over the no-lock ceiling: 1 shard %s of 1 worker; best (%d shard(s), %.0f/s) %s of the best (%d worker(s), %.0f/s) %s\n",
		ratio(s["ours1"], s["ceiling1"]), bestN, best, ratio(best, s["ceiling_best"]), bestW, s["ceiling_best"], b.f.target())
}

// mergedCounts returns the distinct counts of a and c in ascending order.
func mergedCounts(a, c []int) []int {
	out := slices.Concat(a, c)
	slices.Sort(out)
	return slices.Compact(out)
}
