package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/orderstatus"
)

// This file runs the SQL of the close path (scan, close transaction, dead
// letters): the statements on the shop's tables are rendered from its
// schema, those on the executor's own tables are constants, both in
// package closesql. store_pay.go holds the order service's. Integer lists (ids, sku ids, quantities) are rendered as
// literals: they come from the database as int64, so they cannot carry
// anything but digits, and a page of 500 orders would otherwise bind
// thousands of placeholders. Strings (order numbers, reasons, errors) are
// always bound.

// store runs the package's statements on a *sqlx.DB or *sqlx.Tx. The
// close path's statements on the shop's tables are rendered from its
// schema (closesql.Render); sq nil means the executor's own schema.
type store struct{ sq *closesql.Statements }

// sql is the store's rendered statements.
func (s store) sql() *closesql.Statements {
	if s.sq == nil {
		return closesql.Default
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

// scanParams are closesql.Statements.ScanPage's.
type scanParams struct {
	AfterTime  time.Time `db:"after_time"`
	AfterID    int64     `db:"after_id"`
	Now        time.Time `db:"now"`
	AfterEpoch int64     `db:"after_epoch"` // AfterTime in an epoch schema's unit
	NowEpoch   int64     `db:"now_epoch"`   // Now in an epoch schema's unit
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

// scanPage runs closesql.Statements.ScanPage.
func (s store) scanPage(ctx context.Context, q sqlx.QueryerContext, cur scanCursor, now time.Time, shardIndex, shardTotal, limit int) ([]scanRow, error) {
	var rows []scanRow
	unit := s.sql().Schema.Orders.TimeUnit
	err := sqlexec.SelectNamed(ctx, q, &rows, s.sql().ScanPage, scanParams{AfterTime: cur.CreateTime, AfterID: cur.ID,
		Now: now, AfterEpoch: unit.Of(cur.CreateTime), NowEpoch: unit.Of(now), ShardTotal: shardTotal, ShardIndex: shardIndex, Limit: limit})
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

func (store) openLetters(ctx context.Context, q sqlx.QueryerContext, limit int) ([]letterState, error) {
	var rows []letterState
	if err := sqlx.SelectContext(ctx, q, &rows, closesql.OpenLetters, limit); err != nil {
		return nil, fmt.Errorf("read open dead letters: %w", err)
	}
	return rows, nil
}

func (store) letterStates(ctx context.Context, q sqlx.QueryerContext, orderNos []string) ([]letterState, error) {
	return selectIn[letterState](ctx, q, closesql.LetterStates, orderNos, "read dead letters of %d orders")
}

// selectIn reads the rows of query, whose one IN (?) takes the values of
// list (sqlx.In), into a new slice. A query's error is wrapped with what,
// a format given the number of values; sqlx.In's (list is no slice, or
// empty) is returned as it is.
func selectIn[T any](ctx context.Context, q sqlx.QueryerContext, query string, list any, what string) ([]T, error) {
	query, args, err := sqlx.In(query, list)
	if err != nil {
		return nil, err
	}
	var rows []T
	if err := sqlx.SelectContext(ctx, q, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("%s: %w", fmt.Sprintf(what, len(args)), err)
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

// lockOrders runs closesql.Statements.LockOrders.
func (s store) lockOrders(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]orderRow, error) {
	var rows []orderRow
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(s.sql().LockOrders, sqlexec.IntList(ids))); err != nil {
		return nil, fmt.Errorf("lock %d orders: %w", len(ids), err)
	}
	return rows, nil
}

// orderByNo runs closesql.Statements.OrderByNo: nil when there is no
// such order.
func (s store) orderByNo(ctx context.Context, q sqlx.QueryerContext, orderNo string) (*orderRow, error) {
	o, err := sqlexec.GetOne[orderRow](ctx, q, s.sql().OrderByNo, orderNo)
	if err != nil {
		return nil, fmt.Errorf("read order %s: %w", orderNo, err)
	}
	return o, nil
}

// itemRow is one order line. OrderNo is the order's key as the lines
// name it: its number, or its id as text (closesql.Statements.ItemsByID).
type itemRow struct {
	OrderNo  string `db:"order_no"`
	SKUID    int64  `db:"sku_id"`
	Quantity int64  `db:"quantity"`
}

// orderItems runs closesql.Statements.OrderItems for keys, the orders' numbers
// ([]string) or ids ([]int64), as the lines name them.
func (s store) orderItems(ctx context.Context, q sqlx.QueryerContext, keys any) ([]itemRow, error) {
	return selectIn[itemRow](ctx, q, s.sql().OrderItems, keys, "read items of %d orders")
}

// stockRow is one stock row: its key and the values of the declared
// stock columns, in their order.
type stockRow struct {
	SKUID int64
	cols  []int64
}

// lockStock runs closesql.Stock.Lock.
func (s store) lockStock(ctx context.Context, q sqlx.QueryerContext, skus []int64) ([]stockRow, error) {
	st := s.sql().Stock
	rs, err := q.QueryxContext(ctx, fmt.Sprintf(st.Lock, sqlexec.IntList(skus)))
	if err != nil {
		return nil, fmt.Errorf("lock stock of %d skus: %w", len(skus), err)
	}
	defer rs.Close()
	var rows []stockRow
	for rs.Next() {
		r := stockRow{cols: make([]int64, len(s.sql().Schema.Stock.Columns))}
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

// nowSQL reads the database clock once as the session's wall clock and
// as UTC, the frame of an epoch schema's instants. No locks; one row.
const nowSQL = `SELECT NOW(3) AS now, UTC_TIMESTAMP(3) AS utc`

// now reads the database clock: the session's wall clock, and the same
// moment in the frame of the shop's time columns (see runClock).
func (s store) now(ctx context.Context, q sqlx.QueryerContext) (now, shop time.Time, err error) {
	if !s.sql().Schema.Orders.TimeUnit.Epoch() {
		now, err = sqlexec.Now(ctx, q)
		return now, now, err
	}
	var r struct {
		Now time.Time `db:"now"`
		UTC time.Time `db:"utc"`
	}
	if err := sqlx.GetContext(ctx, q, &r, nowSQL); err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return r.Now, r.UTC, nil
}

// closeOrders runs closesql.Statements.CloseOrders.
func (s store) closeOrders(ctx context.Context, e sqlx.ExecerContext, ids []int64, closeTime time.Time, reason string, now time.Time) (int64, error) {
	unit := s.sql().Schema.Orders.TimeUnit // an epoch schema's stamp and guard
	res, err := sqlexec.ExecNamed(ctx, e, fmt.Sprintf(s.sql().CloseOrders, sqlexec.IntList(ids)),
		map[string]any{"close_time": closeTime, "close_reason": reason, "now": now,
			closesql.CloseEpoch: unit.Of(closeTime), closesql.NowEpoch: unit.Of(now)})
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

// releaseStock runs closesql.Stock.Release.
func (s store) releaseStock(ctx context.Context, e sqlx.ExecerContext, deltas []skuDelta) (int64, error) {
	st := s.sql().Stock
	res, err := e.ExecContext(ctx, fmt.Sprintf(st.Release, deltaCaseOn(st.Key, deltas), deltaSKUs(deltas)))
	if err != nil {
		return 0, fmt.Errorf("release stock of %d skus: %w", len(deltas), err)
	}
	return res.RowsAffected()
}

func (store) insertCloseLogs(ctx context.Context, e sqlx.ExecerContext, orderNos []string, closedAt time.Time, reason string) error {
	query, args := closeLogsInsert(orderNos, closedAt, reason)
	if _, err := e.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("log %d closes: %w", len(orderNos), err)
	}
	return nil
}

// closeLogsInsert renders closesql.InsertCloseLog for orderNos.
func closeLogsInsert(orderNos []string, closedAt time.Time, reason string) (string, []any) {
	return sqlexec.Values(closesql.InsertCloseLog, "(?,?,?)", orderNos, func(args []any, no string) []any {
		return append(args, no, closedAt, reason)
	})
}

func (store) resolveDeadLetters(ctx context.Context, e sqlx.ExtContext, orderNos []string) error {
	query, args, err := sqlx.In(closesql.ResolveDeadLetters, orderNos)
	if err != nil {
		return err
	}
	if _, err := e.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("resolve dead letters of %d orders: %w", len(orderNos), err)
	}
	return nil
}

// deadLetterParams are closesql.UpsertDeadLetter's: the order, its error and the
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
	_, err := sqlexec.ExecNamed(ctx, e, closesql.UpsertDeadLetter, p)
	if err != nil {
		return fmt.Errorf("dead-letter order %s: %w", orderNo, err)
	}
	return nil
}

func (store) deadLetterStatus(ctx context.Context, q sqlx.QueryerContext, orderNo string) (string, error) {
	var status string
	err := sqlx.GetContext(ctx, q, &status, closesql.DeadLetterStatus, orderNo)
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
