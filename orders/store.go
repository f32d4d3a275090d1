package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/orderstatus"
)

// This file runs the SQL of the close path (scan, close transaction, dead
// letters): the statements on the shop's tables are rendered from its
// schema (render.go), those on the executor's own tables are constants
// here. store_pay.go holds the order service's. Integer lists (ids, sku ids, quantities) are rendered as
// literals: they come from the database as int64, so they cannot carry
// anything but digits, and a page of 500 orders would otherwise bind
// thousands of placeholders. Strings (order numbers, reasons, errors) are
// always bound.

// store runs the package's statements on a *sqlx.DB or *sqlx.Tx. The
// close path's statements on the shop's tables are rendered from its
// schema (render.go); sq nil means the executor's own schema.
type store struct{ sq *closeSQL }

// sql is the store's rendered statements.
func (s store) sql() *closeSQL {
	if s.sq == nil {
		return defaultSQL
	}
	return s.sq
}

// scanRow is one due order found by a scan page (or given to CloseOrders),
// as it was without a lock: the close transaction's status CAS repeats
// what it relies on (unpaid, due).
type scanRow struct {
	ID             int64         `db:"id"`
	OrderNo        string        `db:"order_no"`
	CreateTime     time.Time     `db:"create_time"`
	TimeoutMinutes int           `db:"timeout_minutes"`
	CouponID       sql.NullInt64 `db:"coupon_id"`
}

// order is r as an unpaid order.
func (r scanRow) order() orderRow { return orderRow{scanRow: r, Status: orderstatus.Unpaid} }

// scanParams are closeSQL.scanPage's.
type scanParams struct {
	AfterTime  time.Time `db:"after_time"`
	AfterID    int64     `db:"after_id"`
	Now        time.Time `db:"now"`
	ShardTotal int       `db:"shard_total"`
	ShardIndex int       `db:"shard_index"`
	Limit      int       `db:"limit"`
}

// scanCursor is the keyset position of a scan: the last row returned.
type scanCursor struct {
	CreateTime time.Time
	ID         int64
}

// firstCursor sorts before every row.
var firstCursor = scanCursor{CreateTime: sqlexec.Earliest, ID: -1}

// scanPage runs closeSQL.scanPage.
func (s store) scanPage(ctx context.Context, q sqlx.QueryerContext, cur scanCursor, now time.Time, shardIndex, shardTotal, limit int) ([]scanRow, error) {
	var rows []scanRow
	err := sqlexec.SelectNamed(ctx, q, &rows, s.sql().scanPage, scanParams{AfterTime: cur.CreateTime, AfterID: cur.ID,
		Now: now, ShardTotal: shardTotal, ShardIndex: shardIndex, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("scan due orders after (%s, %d): %w", cur.CreateTime.Format(time.DateTime), cur.ID, err)
	}
	return rows, nil
}

// letterState is the state of one order's open close dead letter.
type letterState struct {
	OrderNo     string    `db:"order_no"`
	Status      string    `db:"status"`
	NextRetryAt time.Time `db:"next_retry_at"`
}

// openLettersSQL reads the open (waiting or parked) close dead letters, up
// to a limit: when there are few (the usual case: none), the sweep learns
// from this one short read which orders of a page have a letter, instead
// of probing every order of every page (letterStatesSQL).
//
// It walks idx_status_retry over the two open statuses only (resolved
// letters, which pile up, are never read); stage is checked on the row. No
// locks. At most the given limit of rows.
const openLettersSQL = `
SELECT order_no, status, next_retry_at FROM order_dead_letter FORCE INDEX (idx_status_retry)
WHERE status IN ('parked', 'waiting') AND stage = 'close'
LIMIT ?`

func (store) openLetters(ctx context.Context, q sqlx.QueryerContext, limit int) ([]letterState, error) {
	var rows []letterState
	if err := sqlx.SelectContext(ctx, q, &rows, openLettersSQL, limit); err != nil {
		return nil, fmt.Errorf("read open dead letters: %w", err)
	}
	return rows, nil
}

// letterStatesSQL reads the open close dead letters of the orders of a scan
// page, when there are too many open letters to read them all.
//
// The order numbers are bound (sqlx.In). Probes uk_order_stage once per
// order of the page (forced: with a subquery in the scan instead, MariaDB
// materialises the whole dead-letter table per page, and resolved letters
// pile up there). No locks. One row per order with an open letter.
const letterStatesSQL = `
SELECT order_no, status, next_retry_at FROM order_dead_letter FORCE INDEX (uk_order_stage)
WHERE order_no IN (?) AND stage = 'close' AND status IN ('parked', 'waiting')`

func (store) letterStates(ctx context.Context, q sqlx.QueryerContext, orderNos []string) ([]letterState, error) {
	query, args, err := sqlx.In(letterStatesSQL, orderNos)
	if err != nil {
		return nil, err
	}
	var rows []letterState
	if err := sqlx.SelectContext(ctx, q, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("read dead letters of %d orders: %w", len(orderNos), err)
	}
	return rows, nil
}

// orderRow is an order as the close transaction sees it: a page row and
// its status.
type orderRow struct {
	scanRow
	Status int `db:"status"`
}

// due reports whether the order's own deadline has passed at now. Both times
// are wall clocks of the session time zone (see doc.go).
func (o orderRow) due(now time.Time) bool { return !o.deadline().After(now) }

// deadline is when the order falls due: create_time + timeout_minutes, on
// the database clock in the session time zone.
func (o orderRow) deadline() time.Time {
	return o.CreateTime.Add(time.Duration(o.TimeoutMinutes) * time.Minute)
}

// lockOrders runs closeSQL.lockOrders.
func (s store) lockOrders(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]orderRow, error) {
	var rows []orderRow
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(s.sql().lockOrders, sqlexec.IntList(ids))); err != nil {
		return nil, fmt.Errorf("lock %d orders: %w", len(ids), err)
	}
	return rows, nil
}

// orderByNo runs closeSQL.orderByNo.
func (s store) orderByNo(ctx context.Context, q sqlx.QueryerContext, orderNo string) (orderRow, bool, error) {
	var o orderRow
	err := sqlx.GetContext(ctx, q, &o, s.sql().orderByNo, orderNo)
	if errors.Is(err, sql.ErrNoRows) {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("read order %s: %w", orderNo, err)
	}
	return o, true, nil
}

// itemRow is one order line. OrderNo is the order's key as the lines
// name it: its number, or its id as text (closeSQL.itemsByID).
type itemRow struct {
	OrderNo  string `db:"order_no"`
	SKUID    int64  `db:"sku_id"`
	Quantity int64  `db:"quantity"`
}

// orderItems runs closeSQL.orderItems for keys, the orders' numbers
// ([]string) or ids ([]int64), as the lines name them.
func (s store) orderItems(ctx context.Context, q sqlx.QueryerContext, keys any) ([]itemRow, error) {
	query, args, err := sqlx.In(s.sql().orderItems, keys)
	if err != nil {
		return nil, err
	}
	var rows []itemRow
	if err := sqlx.SelectContext(ctx, q, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("read items of %d orders: %w", len(args), err)
	}
	return rows, nil
}

// stockRow is one stock row: its key and the values of the declared
// stock columns, in their order.
type stockRow struct {
	SKUID int64
	cols  []int64
}

// lockStock runs stockSQL.lock.
func (s store) lockStock(ctx context.Context, q sqlx.QueryerContext, skus []int64) ([]stockRow, error) {
	st := s.sql().stock
	rs, err := q.QueryxContext(ctx, fmt.Sprintf(st.lock, sqlexec.IntList(skus)))
	if err != nil {
		return nil, fmt.Errorf("lock stock of %d skus: %w", len(skus), err)
	}
	defer rs.Close()
	var rows []stockRow
	for rs.Next() {
		r := stockRow{cols: make([]int64, len(s.sql().sch.Stock.Columns))}
		dst := []any{&r.SKUID}
		for i := range r.cols {
			dst = append(dst, &r.cols[i])
		}
		if err := rs.Scan(dst...); err != nil {
			return nil, fmt.Errorf("lock stock of %d skus: %w", len(skus), err)
		}
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("lock stock of %d skus: %w", len(skus), err)
	}
	return rows, nil
}

// couponRow is one coupon: by id, its id, status (as text) and the order
// using it; by match, the id of the order it matches.
type couponRow struct {
	ID      int64          `db:"id"`
	Status  string         `db:"status"`
	OrderNo sql.NullString `db:"order_no"`
}

// lockCoupons runs couponSQL.lock for ids (coupon ids; by match, order ids).
func (s store) lockCoupons(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]couponRow, error) {
	var rows []couponRow
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(s.sql().coupon.lock, sqlexec.IntList(ids))); err != nil {
		return nil, fmt.Errorf("lock %d coupons: %w", len(ids), err)
	}
	return rows, nil
}

// closeOrders runs closeSQL.closeOrders.
func (s store) closeOrders(ctx context.Context, e sqlx.ExecerContext, ids []int64, closeTime time.Time, reason string, now time.Time) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, fmt.Sprintf(s.sql().closeOrders, sqlexec.IntList(ids)),
		map[string]any{"close_time": closeTime, "close_reason": reason, "now": now})
	if err != nil {
		return 0, fmt.Errorf("close %d orders: %w", len(ids), err)
	}
	return res.RowsAffected()
}

// skuDelta is a stock change of one SKU.
type skuDelta struct {
	SKUID int64
	Qty   int64
}

// releaseStock runs stockSQL.release.
func (s store) releaseStock(ctx context.Context, e sqlx.ExecerContext, deltas []skuDelta) (int64, error) {
	st := s.sql().stock
	res, err := e.ExecContext(ctx, fmt.Sprintf(st.release, deltaCaseOn(st.key, deltas), deltaSKUs(deltas)))
	if err != nil {
		return 0, fmt.Errorf("release stock of %d skus: %w", len(deltas), err)
	}
	return res.RowsAffected()
}

// restoreCoupons runs couponSQL.restore for ids (coupon ids; by match,
// order ids) of the orders orderNos.
func (s store) restoreCoupons(ctx context.Context, e sqlx.ExtContext, ids []int64, orderNos []string) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, fmt.Sprintf(s.sql().coupon.restore, sqlexec.IntList(ids)), map[string]any{"order_nos": orderNos})
	if err != nil {
		return 0, fmt.Errorf("restore %d coupons: %w", len(ids), err)
	}
	return res.RowsAffected()
}

// insertCloseLogSQL records the closes, one row per order. Params per row:
// order_no, closed_at, reason. uk_order_no makes a second close of an order
// fail with a duplicate-key error (the whole transaction then rolls back).
const insertCloseLogSQL = `INSERT INTO order_close_log (order_no, closed_at, reason) VALUES `

func (store) insertCloseLogs(ctx context.Context, e sqlx.ExecerContext, orderNos []string, closedAt time.Time, reason string) error {
	query, args := closeLogsInsert(orderNos, closedAt, reason)
	if _, err := e.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("log %d closes: %w", len(orderNos), err)
	}
	return nil
}

// closeLogsInsert renders insertCloseLogSQL for orderNos.
func closeLogsInsert(orderNos []string, closedAt time.Time, reason string) (string, []any) {
	var b strings.Builder
	b.WriteString(insertCloseLogSQL)
	args := make([]any, 0, 3*len(orderNos))
	for i, no := range orderNos {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?)")
		args = append(args, no, closedAt, reason)
	}
	return b.String(), args
}

// resolveDeadLettersSQL marks the waiting close dead letters of orders that
// have now been closed as resolved, inside the close transaction. It runs
// only for the orders known to have one (the sweep's letter read,
// CloseOrder's and CloseOrders' first look); a letter written after that
// look, for an order closed anyway, is resolved by the retry job, which
// finds the order closed.
// The order numbers are bound (sqlx.In). One uk_order_stage probe per
// order (forced: otherwise the optimizer may walk every waiting letter of
// idx_status_retry, which grows with an outage); under READ COMMITTED it
// locks only the rows it changes.
const resolveDeadLettersSQL = `
UPDATE order_dead_letter FORCE INDEX (uk_order_stage) SET status = 'resolved'
WHERE stage = 'close' AND status = 'waiting' AND order_no IN (?)`

func (store) resolveDeadLetters(ctx context.Context, e sqlx.ExtContext, orderNos []string) error {
	query, args, err := sqlx.In(resolveDeadLettersSQL, orderNos)
	if err != nil {
		return err
	}
	if _, err := e.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("resolve dead letters of %d orders: %w", len(orderNos), err)
	}
	return nil
}

// upsertDeadLetterSQL records a failed close of one order, in its own
// autocommit statement after the order's transaction rolled back.
//
// A first failure inserts the row with the first status ('waiting', or
// 'parked' when park-after is 1) and the first delay; an existing row (see
// deadLetterParams) counts another attempt. The retry delay is DeadLetterBackoff.schedule().Step of
// the new attempt count, base * 2^(attempts-1) up to the maximum, computed
// here because only the statement knows the row's attempts
// (TestDeadLetterScheduleMatchesBackoff holds the two together). A row that is parked stays parked; any other
// (waiting or resolved) goes back to waiting, or to parked once attempts
// reach park-after. Assignments run left to right, so status and
// next_retry_at see attempts before it is incremented. order_table is the
// Closer's order table, also on an existing row: a letter written before
// the column (migration 0138, empty) learns its table at its next failure.
// One row per (order_no, stage) via uk_order_stage.
const upsertDeadLetterSQL = `
INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at, order_table)
VALUES (:order_no, 'close', :first_status, :last_error, 1, :now + INTERVAL :first_delay_us MICROSECOND, :order_table)
ON DUPLICATE KEY UPDATE
  status = IF(status = 'parked' OR (:park_after > 0 AND attempts + 1 >= :park_after), 'parked', 'waiting'),
  last_error = :last_error,
  order_table = :order_table,
  next_retry_at = :now + INTERVAL FLOOR(LEAST(:base_us * POW(2, LEAST(attempts, 40)), :max_us)) MICROSECOND,
  attempts = attempts + 1`

// deadLetterParams are upsertDeadLetterSQL's: the order, its error and the
// run's clock, the first attempt's status and delay, and the backoff an
// existing row's next attempt is scheduled by (park after, 0 = never; base
// and maximum delay), delays in microseconds; the order's table.
type deadLetterParams struct {
	OrderNo      string    `db:"order_no"`
	OrderTable   string    `db:"order_table"`
	LastError    string    `db:"last_error"`
	Now          time.Time `db:"now"`
	FirstStatus  string    `db:"first_status"`
	FirstDelayUS int64     `db:"first_delay_us"`
	ParkAfter    int       `db:"park_after"`
	BaseUS       int64     `db:"base_us"`
	MaxUS        int64     `db:"max_us"`
}

func (store) upsertDeadLetter(ctx context.Context, e sqlx.ExecerContext, table, orderNo, lastErr string, now time.Time, b DeadLetterBackoff) error {
	p := deadLetterParams{OrderNo: orderNo, OrderTable: table, LastError: lastErr, Now: now, FirstStatus: deadletters.Waiting,
		FirstDelayUS: b.schedule().Step(1).Microseconds(), ParkAfter: b.ParkAfter,
		BaseUS: b.Base.Microseconds(), MaxUS: b.Max.Microseconds()}
	if b.ParkAfter == 1 {
		p.FirstStatus = deadletters.Parked
	}
	_, err := sqlexec.ExecNamed(ctx, e, upsertDeadLetterSQL, p)
	if err != nil {
		return fmt.Errorf("dead-letter order %s: %w", orderNo, err)
	}
	return nil
}

// deadLetterStatusSQL reads the state of one order's close dead letter,
// by order number. No locks; zero or one row.
const deadLetterStatusSQL = `
SELECT status FROM order_dead_letter WHERE order_no = ? AND stage = 'close'`

func (store) deadLetterStatus(ctx context.Context, q sqlx.QueryerContext, orderNo string) (string, error) {
	var status string
	err := sqlx.GetContext(ctx, q, &status, deadLetterStatusSQL, orderNo)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read dead letter of %s: %w", orderNo, err)
	}
	return status, nil
}

func deltaSKUs(deltas []skuDelta) string {
	ids := make([]int64, len(deltas))
	for i, d := range deltas {
		ids[i] = d.SKUID
	}
	return sqlexec.IntList(ids)
}

// deltaCase is deltaCaseOn the executor's own stock key, sku_id.
func deltaCase(deltas []skuDelta) string { return deltaCaseOn("sku_id", deltas) }

// deltaCaseOn is sqlexec.QtyCase of deltas on key.
func deltaCaseOn(key string, deltas []skuDelta) string {
	qty := make(map[int64]int64, len(deltas))
	for _, d := range deltas {
		qty[d.SKUID] = d.Qty
	}
	return sqlexec.QtyCase(key, qty)
}
