package orderdemo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/orderjob/executor/orders/orderstatus"
)

// Spec describes demo data: orders as the order service would have left
// them (quantities moved from available to locked stock, coupons locked by
// unpaid orders, paid orders' stock consumed and coupons used).
type Spec struct {
	// Orders to create.
	Orders int
	// SKUs is the number of SKUs (ids 1..SKUs) items are drawn from. Default
	// 10,000.
	SKUs int
	// DueFraction of the orders are unpaid and past their timeout,
	// PaidFraction are paid, NotDueFraction are unpaid within their timeout;
	// any remainder up to 1 is not due either. All zero: 0.9, 0.05, 0.05.
	DueFraction, PaidFraction, NotDueFraction float64
	// CouponFraction of the orders use a coupon. Default 0 (none).
	CouponFraction float64
	// Reset empties order_info, order_item, inventory, user_coupon,
	// order_close_log, order_dead_letter, order_fulfillment_overdue,
	// payment_conflict and order_outbox first (TRUNCATE), but only when
	// every row in them is one Generate made (it records what it makes
	// in order_job_demo_batch); otherwise it returns a *ResetError and
	// changes nothing. Without Reset, rows are added after the existing ones
	// and stock is added to the SKUs earlier demo data made.
	Reset bool
	// ResetDatabase lets Reset empty those tables whatever they hold, when
	// it names the connection's database (a second key for a destructive
	// act). Any other non-empty value is an error.
	ResetDatabase string
	// TimeoutMinutes of every order. Default 30.
	TimeoutMinutes int
	// StockPerSKU is each SKU's total stock (available + locked + consumed by
	// paid orders) added by this call. Default 1,000,000.
	StockPerSKU int64
	// Seed makes the data reproducible. Default 1.
	Seed uint64
	// OrderNoPrefix goes before the order id in order_no. Default "DEMO";
	// letters, digits, '-' and '_' only.
	OrderNoPrefix string
	// Parallel is the number of connections inserting at once. Default 3.
	Parallel int
}

// Result says what Generate created.
type Result struct {
	Orders, Due, Paid, NotDue, Items, Coupons int
	// FirstID and LastID are the range of order ids created.
	FirstID, LastID int64
	// Now is the database time the create times were computed from.
	Now time.Time
}

var safePrefix = regexp.MustCompile(`^[A-Za-z0-9_-]{0,40}$`)

// Generate inserts demo orders with multi-row statements on a few
// connections (200,000 orders in a few seconds). Create times come from the
// database clock and rise with the order id, as in a real shop: due and paid
// orders (mixed at random in their shares) were created over the day before
// their timeout plus one minute, then the not-due ones within the first half
// of their timeout (so they stay not due for at least half of it). Each order
// has 1-3 items of distinct SKUs, 1-3 units each. Not safe to run twice at
// once on the same database.
func Generate(ctx context.Context, db *sqlx.DB, spec Spec) (Result, error) {
	var res Result
	spec, err := spec.withDefaults()
	if err != nil {
		return res, err
	}
	var st store
	if err := prepareDemo(ctx, db, spec); err != nil {
		return res, err
	}
	start, err := st.demoStart(ctx, db)
	if err != nil {
		return res, err
	}
	if err := reserveDemo(ctx, db, spec, start); err != nil {
		return res, fmt.Errorf("demo data: %w", err)
	}
	gen := newGenerator(ctx, db, spec, start)
	for i := range spec.Orders {
		if gen.ctx.Err() != nil {
			break
		}
		gen.order(i)
		gen.flush(false)
	}
	gen.flush(true)
	if err := gen.stock(); err != nil {
		_ = gen.g.Wait()
		return gen.res, err
	}
	if err := gen.g.Wait(); err != nil {
		return gen.res, fmt.Errorf("generate demo data: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return gen.res, err
	}
	gen.res.Orders = spec.Orders
	return gen.res, nil
}

// reserveDemo reserves the ids first and records the batch before any row
// is written, so every demo row is recognisable as one even if the run is
// cut short.
func reserveDemo(ctx context.Context, db *sqlx.DB, spec Spec, start demoStart) error {
	var st store
	lastOrder := start.MaxOrder + int64(spec.Orders)
	lastCoupon := start.MaxCoupon // no coupons: an empty range
	if spec.CouponFraction > 0 {
		lastCoupon += int64(spec.Orders) // at most one per order
	}
	if err := st.demoReserve(ctx, db, "order_info", start.MaxOrder+1, lastOrder); err != nil {
		return err
	}
	if err := st.demoReserve(ctx, db, "user_coupon", start.MaxCoupon+1, lastCoupon); err != nil {
		return err
	}
	return st.demoRecordBatch(ctx, db, spec.OrderNoPrefix, start.MaxOrder+1, lastOrder, start.MaxCoupon+1, lastCoupon, spec.SKUs)
}

// demoChunk is the rows of a multi-row statement (items: twice as many).
const demoChunk = 2000

// generator writes one Generate's rows: multi-row statements built in
// order and run on up to spec.Parallel connections at once.
type generator struct {
	spec  Spec
	db    *sqlx.DB
	start demoStart
	res   Result
	rng   *rand.Rand
	g     *errgroup.Group
	ctx   context.Context // the group's

	// Units of each SKU (index: the SKU id) locked by unpaid orders and
	// consumed by paid ones.
	locked, consumed []int64
	couponID         int64
	timeoutSec       int64
	// The older orders (due and paid) come first, then nRecent not due;
	// paidShare of the older are paid.
	nOld, nRecent int
	paidShare     float64

	orders, items, coupons rowBatch
	skus                   []int64 // the current order's
}

// rowBatch is a multi-row statement being built.
type rowBatch struct {
	b []byte
	n int
}

// add appends one row of vals, starting the statement with head.
func (r *rowBatch) add(head string, vals ...string) {
	r.b = appendRow(r.b, head, r.n, vals...)
	r.n++
}

func newGenerator(ctx context.Context, db *sqlx.DB, spec Spec, start demoStart) *generator {
	gen := &generator{spec: spec, db: db, start: start,
		res:    Result{Now: start.Now, FirstID: start.MaxOrder + 1, LastID: start.MaxOrder + int64(spec.Orders)},
		rng:    rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15)),
		locked: make([]int64, spec.SKUs+1), consumed: make([]int64, spec.SKUs+1),
		couponID: start.MaxCoupon, timeoutSec: int64(spec.TimeoutMinutes) * 60,
		skus: make([]int64, 0, 3)}
	gen.g, gen.ctx = errgroup.WithContext(ctx)
	gen.g.SetLimit(spec.Parallel)
	// Orders are created in time order, as a shop inserts them: ids and
	// create times rise together, so the scan's walk in create_time order
	// reads the tables front to back. The older part (due and paid orders)
	// spreads over a day ending a minute past the timeout; the newest
	// orders, unpaid and within the first half of their timeout, come last.
	gen.nRecent = int(math.Round(float64(spec.Orders) * (1 - spec.DueFraction - spec.PaidFraction)))
	gen.nRecent = max(0, min(spec.Orders, gen.nRecent))
	gen.nOld = spec.Orders - gen.nRecent
	if spec.DueFraction+spec.PaidFraction > 0 {
		gen.paidShare = spec.PaidFraction / (spec.DueFraction + spec.PaidFraction)
	}
	return gen
}

// submit runs a statement on one of the group's connections.
func (gen *generator) submit(stmt []byte) {
	gen.g.Go(func() error { return store{}.demoExec(gen.ctx, gen.db, stmt) })
}

// flush submits each statement that is full, or (force) not empty.
func (gen *generator) flush(force bool) {
	for _, b := range []struct {
		r     *rowBatch
		limit int
	}{{&gen.orders, demoChunk}, {&gen.items, 2 * demoChunk}, {&gen.coupons, demoChunk}} {
		if b.r.n > 0 && (force || b.r.n >= b.limit) {
			gen.submit(b.r.b)
			*b.r = rowBatch{}
		}
	}
}

// oldSpan is how long the older orders were created over, in seconds.
const oldSpan = 86_400

// order adds the i-th order's rows: its coupon, the order, its items.
func (gen *generator) order(i int) {
	id := gen.start.MaxOrder + 1 + int64(i)
	no := gen.spec.OrderNoPrefix + strconv.FormatInt(id, 10)
	userID := 1 + gen.rng.Int64N(100_000)

	var status int
	var age int64 // seconds before now
	if i < gen.nOld {
		age = gen.timeoutSec + 60 + int64(oldSpan*(gen.nOld-i)/gen.nOld)
		if gen.rng.Float64() < gen.paidShare {
			gen.res.Paid++
			status = orderstatus.Paid
		} else {
			gen.res.Due++
		}
	} else {
		gen.res.NotDue++
		age = (gen.timeoutSec / 2) * int64(gen.spec.Orders-i) / int64(gen.nRecent)
	}
	created := gen.start.Now.Add(-time.Duration(age) * time.Second)

	coupon := "NULL"
	if gen.rng.Float64() < gen.spec.CouponFraction {
		gen.couponID++
		gen.res.Coupons++
		coupon = strconv.FormatInt(gen.couponID, 10)
		cstatus := 1
		if status == orderstatus.Paid {
			cstatus = 2
		}
		gen.coupons.add(demoInsertCouponsSQL, coupon, strconv.FormatInt(userID, 10), strconv.Itoa(cstatus), "'"+no+"'")
	}
	gen.orders.add(demoInsertOrdersSQL,
		strconv.FormatInt(id, 10), "'"+no+"'", strconv.FormatInt(userID, 10), strconv.Itoa(status),
		"'"+created.Format(time.DateTime)+"'", strconv.Itoa(gen.spec.TimeoutMinutes), coupon)
	gen.orderItems(no, status == orderstatus.Paid)
}

// orderItems adds an order's 1-3 items of distinct SKUs, 1-3 units each,
// and counts their units as consumed (paid) or locked.
func (gen *generator) orderItems(no string, paid bool) {
	gen.skus = gen.skus[:0]
	for n := 1 + gen.rng.IntN(min(3, gen.spec.SKUs)); len(gen.skus) < n; {
		sku := 1 + gen.rng.Int64N(int64(gen.spec.SKUs))
		if slices.Contains(gen.skus, sku) {
			continue
		}
		gen.skus = append(gen.skus, sku)
		qty := 1 + gen.rng.Int64N(3)
		if paid {
			gen.consumed[sku] += qty
		} else {
			gen.locked[sku] += qty
		}
		gen.items.add(demoInsertItemsSQL, "'"+no+"'", strconv.FormatInt(sku, 10), strconv.FormatInt(qty, 10))
		gen.res.Items++
	}
}

// stock adds each SKU's stock: StockPerSKU less what the orders locked
// and consumed is available.
func (gen *generator) stock() error {
	var stock rowBatch
	for sku := 1; sku <= gen.spec.SKUs && gen.ctx.Err() == nil; sku++ {
		avail := gen.spec.StockPerSKU - gen.locked[sku] - gen.consumed[sku]
		if avail < 0 {
			return fmt.Errorf("demo stock per sku %d is below the %d units of sku %d's orders", gen.spec.StockPerSKU, gen.locked[sku]+gen.consumed[sku], sku)
		}
		stock.add(demoUpsertStockSQL, strconv.Itoa(sku), strconv.FormatInt(avail, 10), strconv.FormatInt(gen.locked[sku], 10))
		if stock.n == demoChunk {
			gen.submit(append(stock.b, demoUpsertStockTail...))
			stock = rowBatch{}
		}
	}
	if stock.n > 0 {
		gen.submit(append(stock.b, demoUpsertStockTail...))
	}
	return nil
}

func (spec Spec) withDefaults() (Spec, error) {
	if spec.Orders < 0 {
		return spec, errors.New("demo orders is negative")
	}
	spec.SKUs = cmp.Or(spec.SKUs, 10_000)
	spec.TimeoutMinutes = cmp.Or(spec.TimeoutMinutes, 30)
	spec.StockPerSKU = cmp.Or(spec.StockPerSKU, 1_000_000)
	spec.Seed = cmp.Or(spec.Seed, 1)
	spec.Parallel = cmp.Or(spec.Parallel, 3)
	if spec.OrderNoPrefix == "" {
		spec.OrderNoPrefix = "DEMO"
	}
	if !safePrefix.MatchString(spec.OrderNoPrefix) {
		return spec, fmt.Errorf("demo order number prefix %q: use letters, digits, '-' and '_' (at most 40)", spec.OrderNoPrefix)
	}
	if spec.DueFraction == 0 && spec.PaidFraction == 0 && spec.NotDueFraction == 0 {
		spec.DueFraction, spec.PaidFraction, spec.NotDueFraction = 0.9, 0.05, 0.05
	}
	for _, f := range []struct {
		name string
		p    *float64
	}{{"due", &spec.DueFraction}, {"paid", &spec.PaidFraction}, {"not-due", &spec.NotDueFraction}, {"coupon", &spec.CouponFraction}} {
		if !(*f.p >= -rounding && *f.p <= 1+rounding) { // NaN too: it compares false
			return spec, fmt.Errorf("demo %s fraction %v out of [0, 1]", f.name, *f.p)
		}
		*f.p = min(max(*f.p, 0), 1)
	}
	if Remainder(spec.DueFraction, spec.PaidFraction, spec.NotDueFraction) < 0 {
		return spec, fmt.Errorf("demo fractions add up to %v, above 1", spec.DueFraction+spec.PaidFraction+spec.NotDueFraction)
	}
	if spec.SKUs < 1 || spec.TimeoutMinutes < 1 || spec.StockPerSKU < 1 || spec.Parallel < 1 {
		return spec, errors.New("demo SKUs, timeout, stock and parallel must be positive")
	}
	return spec, nil
}

// rounding is how far a sum of fractions may stray from the exact value
// through floating-point arithmetic: 1 - 0.9 - 0.1 is -2.8e-17, not 0.
const rounding = 1e-9

// Remainder is 1 minus the fractions: what is left for the last share when
// the others are given. A result within rounding of 0 is 0, so fractions
// that add up to one leave exactly nothing; a sum truly above 1 gives a
// negative result.
func Remainder(fractions ...float64) float64 {
	r := 1.0
	for _, f := range fractions {
		r -= f
	}
	if math.Abs(r) < rounding {
		return 0
	}
	return r
}

// appendRow appends "(v1,v2,...)" to a multi-row INSERT, starting it with head
// when it is the statement's first row.
func appendRow(b []byte, head string, n int, vals ...string) []byte {
	if n == 0 {
		b = append(b, head...)
	} else {
		b = append(b, ',')
	}
	b = append(b, '(')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ')')
}
