package orders_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/schema"
)

// The close path on a foreign shop that keeps its times as integers since
// the Unix epoch (order.schema.timeUnit): seconds in INT UNSIGNED columns
// or milliseconds in BIGINT ones, for the creation time with one timeout
// or a timeout column, or for the deadline itself. The server runs in
// Europe/Berlin with time_zone=SYSTEM, a zone with daylight saving whose
// wall clock is an hour ahead of UTC today: an epoch compared with the
// session's wall clock would close orders an hour early.

// epochShop is one way of keeping epoch times.
type epochShop struct {
	unit schema.TimeUnit
	by   string // "timeoutMinutes", "timeoutColumn" or "dueTime"
}

func (e epochShop) String() string { return e.unit.String() + "/" + e.by }

// schema declares the foreign shop (LockedOnly) by its epoch columns.
func (e epochShop) schema() schema.Schema {
	s := ordertest.ForeignSchema(ordertest.LockedOnly)
	o := &s.Orders
	o.TimeUnit, o.CloseTime, o.UpdateTime = e.unit, "cancel_e", "updated_e"
	o.CreateTime, o.ScanIndex = "created_e", "idx_status_created_e"
	switch e.by {
	case "timeoutColumn":
		o.TimeoutMinutes, o.TimeoutColumn = 0, "timeout_m"
	case "dueTime":
		o.CreateTime, o.TimeoutMinutes = "", 0
		o.DueTime, o.ScanIndex = "expire_e", "idx_status_expire_e"
	}
	return s
}

// columnType is the shop's type for times in the unit.
func (e epochShop) columnType() string {
	if e.unit == schema.EpochSeconds {
		return "INT UNSIGNED"
	}
	return "BIGINT"
}

// addColumns adds the epoch columns and their scan indexes to t_order.
func (e epochShop) addColumns(t testing.TB, db *sqlx.DB) {
	t.Helper()
	typ := e.columnType()
	_, err := db.Exec(fmt.Sprintf(`ALTER TABLE t_order ADD COLUMN created_e %[1]s NOT NULL DEFAULT 0, ADD COLUMN expire_e %[1]s NULL,
		ADD COLUMN cancel_e %[1]s NULL, ADD COLUMN updated_e %[1]s NULL, ADD COLUMN timeout_m INT NOT NULL DEFAULT 15,
		ADD KEY idx_status_created_e (order_status, created_e), ADD KEY idx_status_expire_e (order_status, expire_e)`, typ))
	require.NoError(t, err)
}

// at is the instant a value in the unit stands for.
func (e epochShop) at(v int64) time.Time {
	if e.unit == schema.EpochSeconds {
		return time.Unix(v, 0).UTC()
	}
	return time.UnixMilli(v).UTC()
}

// epochOrder is an order of the test as placed: its id, its scan time
// in the unit (created_e or expire_e), and whether it is due.
type epochOrder struct {
	sn   string
	id   int64
	scan int64
	due  bool
}

// berlin is a private server in Europe/Berlin, shared by the subtests of
// one test: each makes a database of its own on it.
func berlin(t *testing.T) *mariadbtest.Server {
	t.Helper()
	return mariadbtest.Start(t, mariadbtest.Options{Env: []string{"TZ=Europe/Berlin"}})
}

// epochSetup is foreignSetup on srv's database name for shop e, with the
// epoch columns added.
func epochSetup(t *testing.T, srv *mariadbtest.Server, name string, e epochShop, cfg orders.CloserConfig) *testBundle {
	t.Helper()
	db, dsn := srv.NewDB(t, name)
	db.SetMaxOpenConns(32)
	cfg.Schema = e.schema()
	b := setup(t, paytest.WithDB(&dbtest.DB{DB: db, Name: name, DSN: dsn}), paytest.WithCloser(cfg))
	ordertest.ForeignTables(t, db)
	e.addColumns(t, db)
	var zone string
	require.NoError(t, db.Get(&zone, `SELECT TIMEDIFF(NOW(), UTC_TIMESTAMP())`))
	require.Equal(t, "01:00:00", zone, "the session runs in Berlin's winter time")
	return b
}

// utcNow is the database clock as an instant.
func (b *testBundle) utcNow(t testing.TB) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, b.DB.Get(&now, `SELECT UTC_TIMESTAMP(3)`))
	return now
}

// placeEpoch places foreign order o and sets its epoch columns: created
// age before now, expiring at expire (nil: NULL), with timeout minutes.
func (b *testBundle) placeEpoch(t testing.TB, e epochShop, o ordertest.ForeignOpts, now time.Time, age time.Duration,
	expire *time.Time, timeout int) epochOrder {
	t.Helper()
	id := ordertest.ForeignOrder(t, b.DB.DB, o)
	created := e.unit.Of(now.Add(-age))
	var exp any
	out := epochOrder{sn: o.OrderSn, id: id, scan: created}
	if expire != nil {
		v := e.unit.Of(*expire)
		exp = v
		if e.by == "dueTime" {
			out.scan = v
		}
	}
	_, err := b.DB.Exec(`UPDATE t_order SET created_e = ?, expire_e = ?, timeout_m = ? WHERE id = ?`, created, exp, timeout, id)
	require.NoError(t, err)
	return out
}

// epochShops are the ways of keeping epoch times the tests cover.
var epochShops = []epochShop{
	{schema.EpochSeconds, "timeoutMinutes"}, {schema.EpochSeconds, "timeoutColumn"}, {schema.EpochSeconds, "dueTime"},
	{schema.EpochMillis, "timeoutMinutes"}, {schema.EpochMillis, "timeoutColumn"}, {schema.EpochMillis, "dueTime"},
}

// TestForeignEpochTimes runs, for each way of keeping epoch times, on one
// server in Europe/Berlin: epochExactlyOnce and epochGuard.
func TestForeignEpochTimes(t *testing.T) {
	t.Parallel()
	srv := berlin(t)
	for k, e := range epochShops {
		t.Run("exactly once/"+e.String(), func(t *testing.T) {
			t.Parallel()
			epochExactlyOnce(t, epochSetup(t, srv, fmt.Sprintf("epoch_once_%d", k), e, orders.CloserConfig{}), e)
		})
		t.Run("guard/"+e.String(), func(t *testing.T) {
			t.Parallel()
			epochGuard(t, srv, fmt.Sprintf("epoch_guard_%d", k), e)
		})
	}
}

// epochExactlyOnce is TestForeignDueTimeExactlyOnceWithPayments on shop
// e: the gauge counts exactly the due orders; capped runs close them in
// scan order and resume exactly after the saved cursor, to the
// millisecond; while the shop pays half of the orders and two shards
// close the rest, every order ends paid, cancelled or (not due) unpaid,
// with stock, coupons and points given back exactly once; the close stamps
// cancel_e and updated_e in the unit; the order view reads the times back
// exactly.
func epochExactlyOnce(t *testing.T, b *testBundle, e epochShop) {
	const n = 120
	now := b.utcNow(t)
	notDue := func(i int) bool { return i%4 == 0 }
	var placed []epochOrder
	for i := range n {
		o := ordertest.ForeignOpts{OrderSn: fmt.Sprintf("E-%d", i), MemberID: int64(1 + i%17), Points: int64(i % 5),
			Items: []ordertest.Item{{SKU: int64(1 + i%7), Qty: 1}, {SKU: int64(8 + i%3), Qty: 2}}}
		if i%3 == 0 {
			o.Coupon = int64(1000 + i)
		}
		// Orders a few milliseconds apart: many share a second, and their
		// order by creation is not their order by id.
		step := time.Duration((i*37)%n) * 7 * time.Millisecond
		age, timeout, expire := 16*time.Minute+step, 15, now.Add(-time.Second-step)
		if notDue(i) {
			switch e.by {
			case "timeoutMinutes":
				age = 5*time.Minute + step // an hour early, it would be due
			case "timeoutColumn":
				age, timeout = 20*time.Minute+step, 60
			case "dueTime":
				expire = now.Add(30*time.Minute + step)
			}
		}
		p := b.placeEpoch(t, e, o, now, age, &expire, timeout)
		p.due = !notDue(i)
		placed = append(placed, p)
	}
	// A paid order, due long ago, and (dueTime) an order without a
	// deadline, never due.
	ordertest.ForeignOrder(t, b.DB.DB, ordertest.ForeignOpts{OrderSn: "PAID", Status: ordertest.ForeignPaid, Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
	_, err := b.DB.Exec(`UPDATE t_order SET created_e = ?, expire_e = ? WHERE order_sn = 'PAID'`, e.unit.Of(now.Add(-time.Hour)), e.unit.Of(now.Add(-time.Hour)))
	require.NoError(t, err)
	b.placeEpoch(t, e, ordertest.ForeignOpts{OrderSn: "NULL-DUE", Items: []ordertest.Item{{SKU: 2, Qty: 1}}}, now, 2*time.Hour, nil, 15)
	if e.by != "dueTime" {
		_, err = b.DB.Exec(`UPDATE t_order SET expire_e = NULL, created_e = ? WHERE order_sn = 'NULL-DUE'`, e.unit.Of(now.Add(-time.Minute)))
		require.NoError(t, err)
	}

	var due []epochOrder
	for _, p := range placed {
		if p.due {
			due = append(due, p)
		}
	}
	slices.SortFunc(due, func(a, b epochOrder) int { return cmp.Or(cmp.Compare(a.scan, b.scan), cmp.Compare(a.id, b.id)) })
	count, oldest, err := b.Closer.Overdue(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, len(due), count, "the gauge counts the due orders")
	require.Positive(t, oldest)
	require.Less(t, oldest, 10*time.Minute, "not an hour off")

	out, err := b.Closer.CloseOrder(b.Ctx, "E-0")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeNotDue, out, "E-0 is not due")
	out, err = b.Closer.CloseOrder(b.Ctx, "NULL-DUE")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeNotDue, out, "no deadline: never due")

	// Capped runs close the due orders in scan order, each resuming
	// exactly after the last: neither skipping nor repeating one.
	start := b.utcNow(t)
	closedSet := func() []string {
		var sns []string
		require.NoError(t, b.DB.Select(&sns, `SELECT order_sn FROM t_order WHERE order_status = ? ORDER BY order_sn`, ordertest.ForeignCancelled))
		return sns
	}
	for run := 1; run <= 3; run++ {
		st, err := b.Closer.Run(b.Ctx, orders.RunOptions{PageSize: 10, MaxOrders: 25})
		require.NoError(t, err)
		require.Equal(t, 25, st.Closed, "run %d: %s", run, st)
		require.Less(t, st.MaxLateness, 10*time.Minute, "run %d: lateness not an hour off", run)
		var want []string
		for _, p := range due[:25*run] {
			want = append(want, p.sn)
		}
		slices.Sort(want)
		require.Equal(t, want, closedSet(), "after run %d: the first %d due orders in scan order", run, 25*run)
		at, id, err := orders.SavedCursor(b.Ctx, b.Closer)
		require.NoError(t, err)
		last := due[25*run-1]
		require.Equal(t, last.id, id, "run %d: the cursor is the last closed order's", run)
		require.True(t, e.at(last.scan).Equal(at), "run %d: the cursor keeps its time exactly: %s, want %s", run, at, e.at(last.scan))
	}

	base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
	require.NoError(t, err)
	paid := b.payWhileClosing(t, "E-%d", n)
	end := b.utcNow(t)
	require.NoError(t, ordertest.CheckForeignStamped(b.Ctx, b.DB, base, ordertest.LockedOnly, "cancel_e", "updated_e"))
	cancelled := b.paidOrCancelled(t, "E-%d", paid, notDue)
	require.Equal(t, ordertest.ForeignPaid, b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = 'PAID'`))
	require.Equal(t, ordertest.ForeignUnpaid, b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = 'NULL-DUE'`))
	require.Equal(t, cancelled, b.DB.Count(t, `SELECT COUNT(*) FROM order_close_log`))
	require.Equal(t, cancelled, b.DB.Count(t, `SELECT COUNT(*) FROM t_order WHERE order_status = 4
		AND cancel_e = updated_e AND cancel_e BETWEEN ? AND ?`, e.unit.Of(start), e.unit.Of(end)),
		"the close stamps its time in the unit (%d..%d)", e.unit.Of(start), e.unit.Of(end))
	count, _, err = b.Closer.Overdue(b.Ctx)
	require.NoError(t, err)
	require.Zero(t, count)

	// The order view reads the deadline and the stamps back exactly.
	in, err := inspect.New(b.DB.DB, orders.CompensateLocal).InTables(e.schema(), []string{"t_order"})
	require.NoError(t, err)
	d, err := in.Order(b.Ctx, "E-0")
	require.NoError(t, err)
	var row struct {
		Created int64  `db:"created_e"`
		Expire  *int64 `db:"expire_e"`
		Timeout int    `db:"timeout_m"`
	}
	require.NoError(t, b.DB.Get(&row, `SELECT created_e, expire_e, timeout_m FROM t_order WHERE order_sn = 'E-0'`))
	want := e.at(row.Created).Add(15 * time.Minute)
	switch e.by {
	case "timeoutColumn":
		want = e.at(row.Created).Add(time.Duration(row.Timeout) * time.Minute)
	case "dueTime":
		want = e.at(*row.Expire)
	}
	require.True(t, want.Equal(d.Shop.Deadline()), "deadline %v, want %v", d.Shop.Deadline(), want)
	var sn string
	var stamp int64
	require.NoError(t, b.DB.QueryRow(`SELECT order_sn, cancel_e FROM t_order WHERE order_status = 4 LIMIT 1`).Scan(&sn, &stamp))
	d, err = in.Order(b.Ctx, sn)
	require.NoError(t, err)
	require.True(t, d.Shop.Row.CloseTime.Valid)
	require.True(t, e.at(stamp).Equal(d.Shop.Row.CloseTime.Time), "close time %v, want %v", d.Shop.Row.CloseTime.Time, e.at(stamp))
	require.True(t, e.at(stamp).Equal(d.Shop.Row.UpdateTime.Time))
	if e.by == "dueTime" {
		d, err = in.Order(b.Ctx, "NULL-DUE")
		require.NoError(t, err)
		require.Equal(t, 9999, d.Shop.Deadline().Year(), "never due: the latest time")
	}
}

// epochGuard is TestForeignDueTimeGuardRechecksTheDeadline on shop e: the
// status CAS repeats the unpaid status and the deadline, in the unit,
// under the row lock. Orders the shop pays, or whose deadline it moves an
// hour ahead, after the page read them (in the payment step, under the
// close's Redis locks) are skipped; the others close.
func epochGuard(t *testing.T, srv *mariadbtest.Server, name string, e epochShop) {
	hour := 3600 * e.unit.PerSecond()
	later := map[string]string{ // the deadline an hour ahead
		"timeoutMinutes": fmt.Sprintf(`created_e = created_e + %d`, hour),
		"timeoutColumn":  `timeout_m = timeout_m + 60`,
		"dueTime":        fmt.Sprintf(`expire_e = expire_e + %d`, hour),
	}[e.by]
	var b *testBundle
	b = epochSetup(t, srv, name, e, orders.CloserConfig{TradeCloser: guardTrade(&b, later)})
	now := b.utcNow(t)
	expire := now.Add(-time.Second)
	for i, sn := range guardOrders {
		b.placeEpoch(t, e, ordertest.ForeignOpts{OrderSn: sn, Coupon: int64(100 + i), Points: 3,
			Items: []ordertest.Item{{SKU: 2, Qty: 1}}}, now, 16*time.Minute, &expire, 15)
	}
	base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
	require.NoError(t, err)
	b.guardOutcomes(t)
	require.NoError(t, ordertest.CheckForeignStamped(b.Ctx, b.DB, base, ordertest.LockedOnly, "cancel_e", "updated_e"))
}
