package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// Scenario 16: a shop's own schema (docs/your-schema.md), not the
// executor's, spread over two databases of four order tables each
// (docs/sharded-orders.md). Text statuses, a per-order timeout column, lines
// keyed by the order number, stock keyed by a unique goods code beside its
// own id (two columns given back), a voucher by id that names its order,
// and points given back to the buyer. Two `executor run` processes on
// shards 0/2 and 1/2 close while payment workers pay random orders with the
// shop's own conditional UPDATE; one executor is killed (SIGKILL) mid-run;
// then a final run over every unit. Every due order not paid is closed
// exactly once and compensated, nothing paid is closed, and the closes the
// runs report, unit by unit, are the closes in the databases.
func scenarioShopShards(t *testing.T, h *harness, r *report) {
	perTable := h.p.shopOrders / (shopDBs * shopTables)
	shops := make([]*dbtest.DB, shopDBs)
	var sources []string
	for d := range shops {
		shops[d] = dbtest.NewEmpty(t)
		seedShop(t, shops[d].DB, d, perTable)
		sources = append(sources, fmt.Sprintf("{name: %s, dsn: %q, tables: \"shop_order_{0..%d}\"}", shopSource(d), shops[d].DSN, shopTables-1))
	}
	cfg := filepath.Join(t.TempDir(), "shop.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(shopConfig+"  sources: ["+strings.Join(sources, ", ")+"]\n"), 0o600))
	_, prefix := redistest.Client(t)
	e := baseEnv(t, shops[0].DSN, redistest.Addr(), prefix)
	withConfig := func(args ...string) []string { return append([]string{"-config", cfg}, args...) }

	mig := h.start(t, "migrate", e, withConfig("migrate")...)
	require.Equal(t, 0, mig.wait(t, time.Minute), "migrate; stdout:\n%s\nstderr:\n%s", tail(mig.stdout.String(), 20), tail(mig.stderr.String(), 20))
	prepaid := make([]int, shopDBs)
	for d, db := range shops {
		prepaid[d] = shopCount(t, db.DB, "SELECT COUNT(*) FROM v_orders WHERE state = 'PAID'")
	}

	// Payment workers pay random orders of every unit as the shop's payment
	// code does, through the whole run and the final one.
	pay := startShopPayers(t, shops, perTable)
	defer pay.stop()

	// Paced so that a run lasts 2-3 s (maxPerSecond is split over the
	// process's two sources); the shard 1/2 process is killed once it has
	// closed a page or two.
	due := perTable * shopTables * shopDBs * 8 / 10
	param := fmt.Sprintf("pageSize=50,maxPerSecond=%d", max(200, due/5))
	keep := h.start(t, "shard-0/2", e, withConfig(runArgs(param, "0/2")...)...)
	victim := h.start(t, "shard-1/2", e, withConfig(runArgs(param, "1/2")...)...)
	require.Eventually(t, func() bool { return strings.Contains(victim.stdout.String(), " page 2: ") || victim.exited() },
		30*time.Second, 5*time.Millisecond, "shard 1/2 closes pages")
	time.Sleep(time.Duration(rand.Int64N(int64(400 * time.Millisecond))))
	require.False(t, victim.exited(), "shard 1/2 finished before the kill: slow the runs down")
	victim.kill9()
	killedAt := time.Now()
	require.Equal(t, 0, keep.wait(t, 2*time.Minute), "shard 0/2; stderr:\n%s", tail(keep.stderr.String(), 20))

	// Every unit's closes after the first round: the survivor's units are
	// what it reported; the victim's are its unreported work, and it left
	// some of it.
	afterRound := shopClosedPerUnit(t, shops)
	keptRep := shopUnitReports(t, keep)
	require.Len(t, keptRep, shopTables*shopDBs/2, "shard 0/2 reports half the units:\n%s", keep.stdout.String())
	for d := range shops {
		require.Contains(t, keptRep, shopSource(d)+"/shop_order_0", "shard 0/2 closes in every database")
	}
	byVictim, leftByVictim := 0, 0
	for u, n := range afterRound {
		if rep, ok := keptRep[u]; ok {
			require.Equal(t, n, rep, "unit %s: the closes shard 0/2 reported are the closes in its table", u)
			continue
		}
		byVictim += n
		d, _ := strconv.Atoi(u[len("db"):strings.Index(u, "/")])
		leftByVictim += shopCount(t, shops[d].DB, "SELECT COUNT(*) FROM "+u[strings.Index(u, "/")+1:]+" WHERE "+shopDueUnpaid)
	}
	require.Positive(t, byVictim, "the kill landed before shard 1/2 closed anything")
	require.Positive(t, leftByVictim, "the kill left nothing for the final run")
	r.add("2 dbs x %d tables, %d orders; shard 1/2 killed mid-run after %d closes (%d due left in its units)",
		shopTables, perTable*shopTables*shopDBs, byVictim, leftByVictim)

	// The killed process's locks expire after the lease; then one run over
	// every unit closes what is left, payments still racing it.
	time.Sleep(time.Until(killedAt.Add(2100 * time.Millisecond)))
	final := h.start(t, "final-0/1", e, withConfig(runArgs("pageSize=200", "0/1")...)...)
	require.Equal(t, 0, final.wait(t, 2*time.Minute), "final run; stderr:\n%s", tail(final.stderr.String(), 20))
	paid := pay.stop()
	finalRep := shopUnitReports(t, final)
	require.Len(t, finalRep, shopTables*shopDBs, "the final run reports every unit:\n%s", final.stdout.String())
	end := shopClosedPerUnit(t, shops)
	reported := byVictim
	for u, n := range end {
		require.Equal(t, n-afterRound[u], finalRep[u], "unit %s: the final run's reported closes are its closes in the table", u)
		require.Positive(t, n, "unit %s closed nothing: the work was not spread", u)
		reported += finalRep[u] + keptRep[u]
	}

	keptSum, finalSum := parseSummary(keep.stdout.String()), parseSummary(final.stdout.String())
	require.Zero(t, finalSum.SkippedLocked, "the final run found orders still locked")
	total, notDue := 0, 0
	for d, db := range shops {
		notDue += shopCount(t, db.DB, "SELECT COUNT(*) FROM v_orders WHERE placed_at + INTERVAL pay_limit_min MINUTE > NOW(3)")
		l := shopMeasure(t, db.DB)
		r.final(l)
		requireClean(t, l)
		total += l.Closed
		require.Equal(t, prepaid[d]+int(paid[d]), shopCount(t, db.DB, "SELECT COUNT(*) FROM v_orders WHERE state = 'PAID'"),
			"db%d: every order paid before or during the runs is still paid", d)
	}
	require.Equal(t, total, reported, "closes reported by the runs (plus the killed run's, unit by unit) = closes in the databases")
	require.Positive(t, notDue, "no order was left not due")
	r.add("payments during the runs %d (%d orders paid between a run's scan and its close); not due, left alone %d; closes reported %d + killed run %d = %d in the databases",
		paid[0]+paid[1], keptSum.SkippedPaid+finalSum.SkippedPaid, notDue, reported-byVictim, byVictim, total)
}

const (
	shopDBs    = 2
	shopTables = 4
	// shopDueUnpaid selects the unpaid orders past their own timeout by
	// the database's clock.
	shopDueUnpaid = "state = 'WAIT_PAY' AND placed_at + INTERVAL pay_limit_min MINUTE <= NOW(3)"
)

func shopSource(d int) string { return fmt.Sprintf("db%d", d) }

// shopConfig declares the shop; the sources follow.
const shopConfig = `order:
  schema:
    table: shop_order
    scanIndex: idx_state_placed
    id: oid
    orderNo: trade_no
    user: buyer_id
    status: state
    createTime: placed_at
    unpaid: WAIT_PAY
    closed: CLOSED
    timeoutColumn: pay_limit_min
    closeTime: closed_at
    updateTime: modified_at
    closeReason: close_note
    givebacks: ["member_points.points += points_used by member_points.member_id = buyer_id"]
    items: {table: shop_order_line, index: idx_line_trade, orderKey: orderNo, orderColumn: trade_no, sku: goods_code, quantity: qty}
    stock: {table: warehouse_stock, key: goods_code, index: uk_goods_code, columns: ["available += quantity", "frozen -= quantity"]}
    coupon: {table: voucher, status: use_flag, used: "1", unused: "0", orderColumn: voucher_id, id: vid, orderNo: used_by_trade}
`

// shopTotal is each SKU's stock and each member's points before any order.
const shopTotal = 1000000

// seedShop creates database d's shop tables and n orders in each order
// table: one in ten paid already, one in ten not due yet (placed a minute
// ago), the rest due by their own 15, 30 or 45 minute timeout; a third with
// a voucher, half with points; two lines each over 40 goods. Stock, vouchers
// and points hold what the unpaid and paid orders took.
func seedShop(t *testing.T, db *sqlx.DB, d, n int) {
	t.Helper()
	stmts := []string{
		`CREATE TABLE warehouse_stock (stock_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, goods_code BIGINT NOT NULL,
			available INT NOT NULL, frozen INT NOT NULL, UNIQUE KEY uk_goods_code (goods_code))`,
		`CREATE TABLE voucher (vid BIGINT NOT NULL PRIMARY KEY, owner_id BIGINT NOT NULL, use_flag TINYINT NOT NULL,
			used_by_trade VARCHAR(32) NULL)`,
		`CREATE TABLE member_points (member_id BIGINT NOT NULL PRIMARY KEY, points BIGINT NOT NULL)`,
		fmt.Sprintf(`INSERT INTO warehouse_stock (goods_code, available, frozen) SELECT seq, %d, 0 FROM seq_1_to_40`, shopTotal),
		fmt.Sprintf(`INSERT INTO member_points (member_id, points) SELECT seq, %d FROM seq_1_to_50`, shopTotal),
		// spare vouchers nobody uses: a close must leave them alone
		`INSERT INTO voucher (vid, owner_id, use_flag) SELECT 900000 + seq, 1 + seq % 50, 0 FROM seq_1_to_100`,
	}
	var orders, lines []string
	for i := range shopTables {
		stmts = append(stmts,
			fmt.Sprintf(`CREATE TABLE shop_order_%d (oid BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, trade_no VARCHAR(32) NOT NULL,
				buyer_id BIGINT NOT NULL, state VARCHAR(16) NOT NULL, placed_at DATETIME(3) NOT NULL, pay_limit_min INT NOT NULL,
				closed_at DATETIME(3) NULL, modified_at DATETIME(3) NULL, close_note VARCHAR(64) NULL,
				voucher_id BIGINT NULL, points_used INT NOT NULL DEFAULT 0,
				UNIQUE KEY uk_trade_no (trade_no), KEY idx_state_placed (state, placed_at))`, i),
			fmt.Sprintf(`CREATE TABLE shop_order_line_%d (line_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, trade_no VARCHAR(32) NOT NULL,
				goods_code BIGINT NOT NULL, qty INT NOT NULL, KEY idx_line_trade (trade_no))`, i),
			// ids overlap between tables, order numbers do not
			fmt.Sprintf(`INSERT INTO shop_order_%[1]d (oid, trade_no, buyer_id, state, placed_at, pay_limit_min, voucher_id, points_used)
				SELECT seq, CONCAT('D%[2]dT%[1]d-', seq), 1 + (seq * 7 + %[1]d) %% 50, IF(seq %% 10 = 0, 'PAID', 'WAIT_PAY'),
				       NOW(3) - INTERVAL IF(seq %% 10 = 1, 1, 16 + (seq %% 3) * 15 + seq %% 120) MINUTE, 15 + (seq %% 3) * 15,
				       IF(seq %% 3 = 0, %[1]d * 100000 + seq, NULL), IF(seq %% 2 = 0, 5 + seq %% 7, 0)
				FROM seq_1_to_%[3]d`, i, d, n),
			fmt.Sprintf(`INSERT INTO shop_order_line_%[1]d (trade_no, goods_code, qty)
				SELECT CONCAT('D%[2]dT%[1]d-', o.seq), 1 + (o.seq * 7 + l.seq * 131 + %[1]d * 13) %% 40, 1 + l.seq + o.seq %% 3
				FROM seq_1_to_%[3]d o JOIN seq_0_to_1 l`, i, d, n),
			fmt.Sprintf(`INSERT INTO voucher (vid, owner_id, use_flag, used_by_trade)
				SELECT voucher_id, buyer_id, 1, trade_no FROM shop_order_%d WHERE voucher_id IS NOT NULL`, i),
		)
		orders = append(orders, fmt.Sprintf("SELECT %d AS tbl, o.* FROM shop_order_%d o", i, i))
		lines = append(lines, fmt.Sprintf("SELECT * FROM shop_order_line_%d", i))
	}
	stmts = append(stmts,
		// the test's views over the units (the executor never reads them)
		"CREATE VIEW v_orders AS "+strings.Join(orders, " UNION ALL "),
		"CREATE VIEW v_lines AS "+strings.Join(lines, " UNION ALL "),
		`UPDATE warehouse_stock s JOIN (SELECT l.goods_code, SUM(l.qty) AS q FROM v_lines l
			JOIN v_orders o ON o.trade_no = l.trade_no AND o.state IN ('WAIT_PAY', 'PAID') GROUP BY l.goods_code) h
			ON h.goods_code = s.goods_code SET s.available = s.available - h.q, s.frozen = s.frozen + h.q`,
		`UPDATE member_points m JOIN (SELECT buyer_id, SUM(points_used) AS p FROM v_orders GROUP BY buyer_id) h
			ON h.buyer_id = m.member_id SET m.points = m.points - h.p`,
	)
	for _, s := range stmts {
		_, err := db.ExecContext(context.Background(), s)
		require.NoError(t, err, s)
	}
}

// shopStockHeld counts stock rows, s, beside what the open and paid orders
// hold of each, h.q; a WHERE follows.
const shopStockHeld = `SELECT COUNT(*) FROM warehouse_stock s LEFT JOIN (SELECT l.goods_code, SUM(l.qty) AS q FROM v_lines l
		JOIN v_orders o ON o.trade_no = l.trade_no AND o.state IN ('WAIT_PAY', 'PAID') GROUP BY l.goods_code) h
		ON h.goods_code = s.goods_code`

// shopChecks are the invariants of the declared shop, per database, each a
// query counting what breaks it. Stock and points are conserved: what the
// unpaid and paid orders hold is taken, nothing else (a giveback missed or
// done twice shows); vouchers of closed orders are free and name no order,
// those of the others used by them; a closed order has its close and update
// stamps, no earlier than its deadline, and exactly one close-log row, and
// no close-log row names an order not closed.
var shopChecks = []struct{ rule, query string }{
	{"stock", fmt.Sprintf(`%s WHERE s.frozen <> COALESCE(h.q, 0) OR s.available + s.frozen <> %d`, shopStockHeld, shopTotal)},
	{"points", fmt.Sprintf(`SELECT COUNT(*) FROM member_points m LEFT JOIN (SELECT buyer_id, SUM(points_used) AS p FROM v_orders
		WHERE state IN ('WAIT_PAY', 'PAID') GROUP BY buyer_id) h ON h.buyer_id = m.member_id WHERE m.points + COALESCE(h.p, 0) <> %d`, shopTotal)},
	{"voucher", `SELECT COUNT(*) FROM v_orders o LEFT JOIN voucher v ON v.vid = o.voucher_id WHERE o.voucher_id IS NOT NULL AND
		(v.vid IS NULL OR IF(o.state = 'CLOSED', v.use_flag <> 0 OR v.used_by_trade IS NOT NULL, v.use_flag <> 1 OR NOT v.used_by_trade <=> o.trade_no))`},
	{"spare_voucher", `SELECT COUNT(*) FROM voucher WHERE vid > 900000 AND (use_flag <> 0 OR used_by_trade IS NOT NULL)`},
	{"state", `SELECT COUNT(*) FROM v_orders WHERE state NOT IN ('WAIT_PAY', 'PAID', 'CLOSED')`},
	{"stamps", `SELECT COUNT(*) FROM v_orders WHERE state = 'CLOSED' AND (closed_at IS NULL OR modified_at IS NULL OR close_note IS NULL)`},
	{"close_log", `SELECT COUNT(*) FROM v_orders o LEFT JOIN order_close_log l ON l.order_no = o.trade_no WHERE (o.state = 'CLOSED') <> (l.id IS NOT NULL)`},
	{"close_log_orphan", `SELECT COUNT(*) FROM order_close_log l LEFT JOIN v_orders o ON o.trade_no = l.order_no WHERE o.oid IS NULL`},
}

// shopMeasure computes the ledger of one shop database.
func shopMeasure(t *testing.T, db *sqlx.DB) ledger {
	t.Helper()
	var l ledger
	l.Closed = shopCount(t, db, "SELECT COUNT(*) FROM v_orders WHERE state = 'CLOSED'")
	l.Lost = shopCount(t, db, "SELECT COUNT(*) FROM v_orders WHERE "+shopDueUnpaid)
	l.Early = shopCount(t, db, "SELECT COUNT(*) FROM v_orders WHERE state = 'CLOSED' AND closed_at < placed_at + INTERVAL pay_limit_min MINUTE")
	l.Due = l.Closed + l.Lost
	l.DeadLetters = shopCount(t, db, "SELECT COUNT(*) FROM order_dead_letter")
	// Over-released stock or points: less held than the open orders hold.
	l.Doubled = shopCount(t, db, shopStockHeld+" WHERE s.frozen < COALESCE(h.q, 0)")
	l.Compensated = shopCount(t, db, `SELECT COUNT(*) FROM v_orders o JOIN order_close_log cl ON cl.order_no = o.trade_no
		LEFT JOIN voucher v ON v.vid = o.voucher_id
		WHERE o.state = 'CLOSED' AND (o.voucher_id IS NULL OR (v.use_flag = 0 AND v.used_by_trade IS NULL))`)
	for _, c := range shopChecks {
		if n := shopCount(t, db, c.query); n > 0 {
			l.Violations = append(l.Violations, fmt.Sprintf("%s: %d rows", c.rule, n))
		}
	}
	return l
}

func shopCount(t *testing.T, db *sqlx.DB, query string) int {
	t.Helper()
	var n int
	require.NoError(t, db.Get(&n, query), query)
	return n
}

// shopClosedPerUnit counts the closed orders of every unit, by the unit's
// name in the run log (db0/shop_order_0 ...).
func shopClosedPerUnit(t *testing.T, shops []*dbtest.DB) map[string]int {
	t.Helper()
	out := map[string]int{}
	for d, db := range shops {
		for i := range shopTables {
			table := fmt.Sprintf("shop_order_%d", i)
			out[shopSource(d)+"/"+table] = shopCount(t, db.DB, "SELECT COUNT(*) FROM "+table+" WHERE state = 'CLOSED'")
		}
	}
	return out
}

var unitSummaryRE = regexp.MustCompile(`\] (db\d/shop_order_\d): scanned=\d+ closed=(\d+) `)

// shopUnitReports reads the closes a finished run reports per unit.
func shopUnitReports(t *testing.T, c *child) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range unitSummaryRE.FindAllStringSubmatch(c.stdout.String(), -1) {
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		out[m[1]] += n
	}
	return out
}

// shopPayers are the payment workers: each pays random orders of random
// units with the shop's own conditional UPDATE, counting per database the
// orders it moved from WAIT_PAY to PAID.
type shopPayers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	paid   [shopDBs]atomic.Int64
	errs   chan error
	t      *testing.T
	once   sync.Once
}

func startShopPayers(t *testing.T, shops []*dbtest.DB, perTable int) *shopPayers {
	ctx, cancel := context.WithCancel(context.Background())
	p := &shopPayers{cancel: cancel, errs: make(chan error, 4), t: t}
	for w := range 4 {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			tick := time.NewTicker(25 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				d := rng.IntN(shopDBs)
				q := fmt.Sprintf("UPDATE shop_order_%d SET state = 'PAID', modified_at = NOW(3) WHERE oid = ? AND state = 'WAIT_PAY'", rng.IntN(shopTables))
				// Not ctx: a payment cancelled by stop could commit on the
				// server while the driver reports only the cancellation,
				// and go uncounted (CI17: 251 paid, 250 counted).
				res, err := shops[d].ExecContext(context.WithoutCancel(ctx), q, 1+rng.IntN(perTable))
				var me *mysql.MySQLError
				switch {
				case err == nil:
				case errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205):
					continue // a deadlock or lock wait with a close: the shop's payment retries later
				case ctx.Err() == nil:
					p.errs <- err
					return
				default:
					return
				}
				if n, _ := res.RowsAffected(); n == 1 {
					p.paid[d].Add(1)
				}
			}
		}()
	}
	return p
}

// stop ends the payers (once) and returns what they paid per database.
func (p *shopPayers) stop() [shopDBs]int64 {
	p.once.Do(func() {
		p.cancel()
		p.wg.Wait()
		close(p.errs)
		for err := range p.errs {
			p.t.Errorf("payment worker: %v", err)
		}
	})
	var out [shopDBs]int64
	for d := range out {
		out[d] = p.paid[d].Load()
	}
	return out
}
