package ordertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/schema"
)

// This file is a shop that keeps its orders in its own schema, unlike the
// executor's: t_order with an order_sn, status 0 unpaid, 1 paid and 4
// cancelled, one 15-minute timeout for every order, a cancel and an update
// time to stamp and no reason column; lines keyed by the order's numeric
// id; stock where only a locked column is given back (real stock is taken
// at payment, from t_sku_stock, keyed by a unique sku beside its own id);
// goods whose stock is taken at placement and added back (t_goods); a
// coupon-history table matched by (member, coupon, used); loyalty points
// used on the order and given back to the member's row.
//
// ForeignTables creates it; ForeignSchema declares it; ForeignOrder places
// one order in it; ForeignShop fills it for plan tests; ForeignPay pays an
// order as the shop would; SnapshotForeign and CheckForeign hold the
// invariants of a close on it.

// ForeignTimeout is every foreign order's payment timeout.
const ForeignTimeout = 15 * time.Minute

// Foreign order statuses.
const (
	ForeignUnpaid    = 0
	ForeignPaid      = 1
	ForeignCancelled = 4
)

var foreignDDL = []string{
	`CREATE TABLE t_order (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		order_sn VARCHAR(40) NOT NULL,
		member_id BIGINT NOT NULL,
		order_status TINYINT NOT NULL DEFAULT 0,
		created_at DATETIME(3) NOT NULL,
		updated_at DATETIME(3) NULL,
		cancel_time DATETIME(3) NULL,
		coupon_id BIGINT NULL,
		user_coupon_id BIGINT NULL,
		use_points INT NOT NULL DEFAULT 0,
		UNIQUE KEY uk_order_sn (order_sn),
		KEY idx_status_created (order_status, created_at)
	)`,
	`CREATE TABLE t_order_item (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		order_id BIGINT NOT NULL,
		goods_sku BIGINT NOT NULL,
		num INT NOT NULL,
		KEY idx_order_id (order_id)
	)`,
	`CREATE TABLE t_sku_stock (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		sku BIGINT NOT NULL,
		stock INT NOT NULL,
		locked INT NOT NULL DEFAULT 0,
		UNIQUE KEY uk_sku (sku)
	)`,
	`CREATE TABLE t_goods (
		id BIGINT NOT NULL PRIMARY KEY,
		stock INT NOT NULL
	)`,
	`CREATE TABLE t_coupon_history (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		member_id BIGINT NOT NULL,
		coupon_id BIGINT NOT NULL,
		use_status TINYINT NOT NULL,
		KEY idx_member_coupon (member_id, coupon_id)
	)`,
	`CREATE TABLE t_user_coupon (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		member_id BIGINT NOT NULL,
		state VARCHAR(16) NOT NULL
	)`,
	`CREATE TABLE t_member (
		id BIGINT NOT NULL PRIMARY KEY,
		points INT NOT NULL
	)`,
}

// ForeignTables creates the foreign shop's tables in db, beside the
// executor's own, and fails t if it cannot.
func ForeignTables(t testing.TB, db *sqlx.DB) {
	t.Helper()
	if err := CreateForeignTables(context.Background(), db); err != nil {
		t.Fatal(err)
	}
}

// CreateForeignTables creates the foreign shop's tables in db, empty: the
// bench fills them from its own orders.
func CreateForeignTables(ctx context.Context, db sqlx.ExecerContext) error {
	for _, stmt := range foreignDDL {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("ordertest: foreign tables: %w", err)
		}
	}
	return nil
}

// ForeignYAML declares the foreign shop (ForeignSchema(LockedOnly)) as an
// operator would, in the configuration file.
const ForeignYAML = `
order:
  schema:
    table: t_order
    scanIndex: idx_status_created
    orderNo: order_sn
    user: member_id
    status: order_status
    createTime: created_at
    unpaid: 0
    closed: 4
    timeoutColumn: ""
    timeoutMinutes: 15
    closeTime: cancel_time
    updateTime: updated_at
    closeReason: ""
    givebacks: ["t_member.points += use_points by t_member.id = member_id"]
    items: {table: t_order_item, index: idx_order_id, orderKey: id, orderColumn: order_id, sku: goods_sku, quantity: num}
    stock: {table: t_sku_stock, key: sku, index: uk_sku, columns: ["locked -= quantity"]}
    coupon:
      table: t_coupon_history
      status: use_status
      match: ["member_id = member_id", "coupon_id = coupon_id"]
      index: idx_member_coupon
`

// ForeignStock says which of the foreign shop's stock tables a schema gives
// stock back to.
type ForeignStock int

const (
	// LockedOnly gives back t_sku_stock.locked (locked -= quantity): the
	// shop reserves at placement and takes real stock at payment.
	LockedOnly ForeignStock = iota
	// TakenAtPlacement adds back t_goods.stock (stock += quantity): the
	// shop takes stock when the order is placed.
	TakenAtPlacement
)

// ForeignSchema declares the foreign shop, giving stock back as st says,
// with the coupon matched in t_coupon_history and the points given back to
// t_member.
func ForeignSchema(st ForeignStock) schema.Schema {
	s := schema.Schema{Declared: true,
		Orders: schema.Orders{Table: "t_order", ScanIndex: "idx_status_created", ID: "id", OrderNo: "order_sn",
			User: "member_id", Status: "order_status", CreateTime: "created_at",
			Unpaid: schema.Int(ForeignUnpaid), Closed: schema.Int(ForeignCancelled),
			TimeoutMinutes: int(ForeignTimeout / time.Minute), CloseTime: "cancel_time", UpdateTime: "updated_at"},
		Items: schema.Items{Table: "t_order_item", Index: "idx_order_id", ByID: true, OrderColumn: "order_id",
			SKU: "goods_sku", Quantity: "num"},
		Stock: &schema.Stock{Table: "t_sku_stock", Key: "sku", Index: "uk_sku",
			Columns: []schema.StockColumn{{Name: "locked", Subtract: true}}},
		Coupon: &schema.Coupon{Table: "t_coupon_history", Status: "use_status", Used: schema.Int(1), Unused: schema.Int(0),
			Match: []schema.Pair{{Column: "member_id", OrderColumn: "member_id"}, {Column: "coupon_id", OrderColumn: "coupon_id"}},
			Index: "idx_member_coupon"},
		Extra: []schema.Giveback{{Table: "t_member", Column: "points", Amount: "use_points", Key: "id", OrderKey: "member_id"}},
	}
	if st == TakenAtPlacement {
		s.Stock = &schema.Stock{Table: "t_goods", Key: "id", Index: "PRIMARY",
			Columns: []schema.StockColumn{{Name: "stock"}}}
	}
	return s
}

// ForeignOpts describe one foreign order.
type ForeignOpts struct {
	OrderSn  string // required
	MemberID int64  // default 7
	Status   int    // ForeignUnpaid (default) or ForeignPaid
	// Age places the order this long before the database's clock: past
	// ForeignTimeout it is due.
	Age time.Duration
	// Items are the lines; each SKU gets its stock rows (100 in stock) if
	// it has none, and the order reserves (or takes) its quantities.
	Items []Item
	// Coupon is the coupon the order uses (0: none): a used row of the
	// member's coupon history.
	Coupon int64
	// Points are the member's points the order uses, taken from the
	// member's row (made with 1000 if missing).
	Points int64
	// UserCoupon gives the order a coupon of its own kept by id: a
	// t_user_coupon row in state 'USED', named by t_order.user_coupon_id
	// (ForeignCouponByID declares it).
	UserCoupon bool
}

// ForeignCouponByID is the foreign shop's coupon kept by id: the order's
// user_coupon_id names a t_user_coupon row, whose text state goes from
// 'USED' back to 'UNUSED'; the row does not name its order.
func ForeignCouponByID() *schema.Coupon {
	used, _ := schema.ParseValue("USED")
	unused, _ := schema.ParseValue("UNUSED")
	return &schema.Coupon{Table: "t_user_coupon", Status: "state", Used: used, Unused: unused,
		OrderColumn: "user_coupon_id", ID: "id"}
}

// ForeignOrder places one foreign order as the shop does, in one
// transaction, and returns its id. An unpaid order holds its reservation,
// stock, coupon and points; a paid one has had its reservation released
// and keeps the rest.
func ForeignOrder(t testing.TB, db *sqlx.DB, o ForeignOpts) int64 {
	t.Helper()
	var id int64
	err := sqlexec.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
		var err error
		id, err = placeForeign(context.Background(), tx, o)
		return err
	})
	if err != nil {
		t.Fatalf("ordertest: foreign order %s: %v", o.OrderSn, err)
	}
	return id
}

func placeForeign(ctx context.Context, tx *sqlx.Tx, o ForeignOpts) (int64, error) {
	if o.MemberID == 0 {
		o.MemberID = 7
	}
	var coupon, userCoupon any
	if o.Coupon != 0 {
		coupon = o.Coupon
	}
	if o.UserCoupon {
		res, err := tx.ExecContext(ctx, `INSERT INTO t_user_coupon (member_id, state) VALUES (?, 'USED')`, o.MemberID)
		if err != nil {
			return 0, err
		}
		if userCoupon, err = res.LastInsertId(); err != nil {
			return 0, err
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO t_order (order_sn, member_id, order_status, created_at, coupon_id, user_coupon_id, use_points)
		VALUES (?, ?, ?, NOW(3) - INTERVAL ? MICROSECOND, ?, ?, ?)`, o.OrderSn, o.MemberID, o.Status, o.Age.Microseconds(), coupon, userCoupon, o.Points)
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	stmts := []struct {
		q    string
		args []any
	}{
		{`INSERT IGNORE INTO t_member (id, points) VALUES (?, 1000)`, []any{o.MemberID}},
		{`UPDATE t_member SET points = points - ? WHERE id = ?`, []any{o.Points, o.MemberID}},
	}
	if o.Coupon != 0 {
		stmts = append(stmts, struct {
			q    string
			args []any
		}{`INSERT INTO t_coupon_history (member_id, coupon_id, use_status) VALUES (?, ?, 1)`, []any{o.MemberID, o.Coupon}})
	}
	for _, it := range o.Items {
		locked := it.Qty
		if o.Status == ForeignPaid {
			locked = 0 // released at payment, when the real stock was taken
		}
		stmts = append(stmts, []struct {
			q    string
			args []any
		}{
			{`INSERT INTO t_order_item (order_id, goods_sku, num) VALUES (?, ?, ?)`, []any{id, it.SKU, it.Qty}},
			{`INSERT IGNORE INTO t_sku_stock (sku, stock, locked) VALUES (?, 100, 0)`, []any{it.SKU}},
			{`UPDATE t_sku_stock SET locked = locked + ?, stock = stock - ? WHERE sku = ?`, []any{locked, it.Qty - locked, it.SKU}},
			{`INSERT IGNORE INTO t_goods (id, stock) VALUES (?, 100)`, []any{it.SKU}},
			{`UPDATE t_goods SET stock = stock - ? WHERE id = ?`, []any{it.Qty, it.SKU}},
		}...)
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s.q, s.args...); err != nil {
			return 0, fmt.Errorf("%s: %w", s.q, err)
		}
	}
	return id, nil
}

// ForeignPay pays an unpaid foreign order as the shop does: the status CAS
// 0 → 1 and, when it changed the row, the reservation released and the real
// stock taken. It reports whether the order was paid (false: it was no
// longer unpaid, e.g. closed).
//
// The shop's stock update locks the order's stock rows in its join's
// order, not the close's ascending keys, so it may meet a close in a
// deadlock; InnoDB then rolls the payment back, and the shop pays again,
// as a shop's payment does (a few times).
func ForeignPay(ctx context.Context, db *sqlx.DB, orderSn string) (bool, error) {
	for try := 1; ; try++ {
		paid, err := foreignPayOnce(ctx, db, orderSn)
		if try < 5 && dbserver.ServerMariaDB.RolledBack(err) {
			continue
		}
		return paid, err
	}
}

func foreignPayOnce(ctx context.Context, db *sqlx.DB, orderSn string) (bool, error) {
	paid := false
	err := sqlexec.InTx(ctx, db, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE t_order SET order_status = 1, updated_at = NOW(3) WHERE order_sn = ? AND order_status = 0`, orderSn)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		paid = true
		_, err = tx.ExecContext(ctx, `UPDATE t_sku_stock s JOIN (
				SELECT i.goods_sku, SUM(i.num) AS q FROM t_order o JOIN t_order_item i ON i.order_id = o.id
				WHERE o.order_sn = ? GROUP BY i.goods_sku) x ON x.goods_sku = s.sku
			SET s.locked = s.locked - x.q, s.stock = s.stock - x.q`, orderSn)
		return err
	})
	return paid, err
}

// ForeignShop fills the foreign shop with n orders on skus SKUs for plan
// tests, in bulk: 60% unpaid and due, 10% unpaid and not due, 30% paid; a
// third with a coupon, half with points; two lines each.
func ForeignShop(t testing.TB, db *sqlx.DB, n, skus int) {
	t.Helper()
	ctx := context.Background()
	for _, stmt := range []string{
		fmt.Sprintf(`INSERT INTO t_order (id, order_sn, member_id, order_status, created_at, coupon_id, user_coupon_id, use_points)
			SELECT seq, CONCAT('SN', seq), 1 + seq %% 997,
			       IF(seq %% 10 < 3, 1, 0),
			       NOW(3) - INTERVAL IF(seq %% 10 = 3, 1, 60 + (%[1]d - seq) / 10) MINUTE,
			       IF(seq %% 3 = 0, seq, NULL), IF(seq %% 3 = 0, seq, NULL), IF(seq %% 2 = 0, 5, 0)
			FROM seq_1_to_%[1]d`, n),
		fmt.Sprintf(`INSERT INTO t_user_coupon (id, member_id, state)
			SELECT seq, 1 + seq %% 997, IF(seq %% 3 = 0, 'USED', 'UNUSED') FROM seq_1_to_%d`, n),
		fmt.Sprintf(`INSERT INTO t_order_item (order_id, goods_sku, num)
			SELECT o.seq, 1 + (o.seq * 7 + l.seq * 131) %% %d, 1 + l.seq FROM seq_1_to_%d o JOIN seq_0_to_1 l`, skus, n),
		fmt.Sprintf(`INSERT INTO t_sku_stock (sku, stock, locked) SELECT seq, 1000000, 100000 FROM seq_1_to_%d`, skus),
		fmt.Sprintf(`INSERT INTO t_goods (id, stock) SELECT seq, 1000000 FROM seq_1_to_%d`, skus),
		`INSERT INTO t_coupon_history (member_id, coupon_id, use_status)
			SELECT member_id, coupon_id, 1 FROM t_order WHERE coupon_id IS NOT NULL`,
		`INSERT INTO t_coupon_history (member_id, coupon_id, use_status)
			SELECT member_id, 1000000 + id, 0 FROM t_order WHERE id % 4 = 1`,
		`INSERT INTO t_member (id, points) SELECT seq, 100000 FROM seq_1_to_997`,
		`ANALYZE TABLE t_order, t_order_item, t_sku_stock, t_goods, t_coupon_history, t_user_coupon, t_member`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("ordertest: foreign shop: %v\n%s", err, stmt)
		}
	}
}

// ForeignBaseline is what CheckForeign compares with: the foreign shop's
// holdings with every unpaid order's taken back, as if none had been
// placed.
type ForeignBaseline struct {
	locked, goods, points map[int64]int64
	paid                  []int64
}

// foreignHeldSQL is what unpaid and paid orders hold, per key: kind 'l'
// a reservation of t_sku_stock.locked (unpaid), 'g' t_goods.stock taken
// (unpaid or paid), 'p' points used (unpaid or paid).
const foreignHeldSQL = `
SELECT 'l' AS kind, i.goods_sku AS k, SUM(i.num) AS q FROM t_order o JOIN t_order_item i ON i.order_id = o.id
  WHERE o.order_status = 0 GROUP BY i.goods_sku
UNION ALL
SELECT 'g', i.goods_sku, SUM(i.num) FROM t_order o JOIN t_order_item i ON i.order_id = o.id
  WHERE o.order_status IN (0, 1) GROUP BY i.goods_sku
UNION ALL
SELECT 'p', member_id, SUM(use_points) FROM t_order WHERE order_status IN (0, 1) GROUP BY member_id`

type heldRow struct {
	Kind string `db:"kind"`
	Key  int64  `db:"k"`
	Qty  int64  `db:"q"`
}

// SnapshotForeign takes the foreign shop's baseline.
func SnapshotForeign(ctx context.Context, db sqlx.QueryerContext) (*ForeignBaseline, error) {
	b := &ForeignBaseline{}
	var err error
	if b.locked, b.goods, b.points, err = foreignValues(ctx, db); err != nil {
		return nil, err
	}
	var held []heldRow
	if err := sqlx.SelectContext(ctx, db, &held, foreignHeldSQL); err != nil {
		return nil, fmt.Errorf("ordertest: foreign holdings: %w", err)
	}
	for _, h := range held {
		switch h.Kind {
		case "l":
			b.locked[h.Key] -= h.Qty
		case "g":
			b.goods[h.Key] += h.Qty
		case "p":
			b.points[h.Key] += h.Qty
		}
	}
	if err := sqlx.SelectContext(ctx, db, &b.paid, `SELECT id FROM t_order WHERE order_status = 1 ORDER BY id`); err != nil {
		return nil, fmt.Errorf("ordertest: foreign paid orders: %w", err)
	}
	return b, nil
}

func foreignValues(ctx context.Context, db sqlx.QueryerContext) (locked, goods, points map[int64]int64, err error) {
	read := func(q string) (map[int64]int64, error) {
		var rows []struct {
			K int64 `db:"k"`
			V int64 `db:"v"`
		}
		if err := sqlx.SelectContext(ctx, db, &rows, q); err != nil {
			return nil, fmt.Errorf("ordertest: %s: %w", q, err)
		}
		m := make(map[int64]int64, len(rows))
		for _, r := range rows {
			m[r.K] = r.V
		}
		return m, nil
	}
	if locked, err = read(`SELECT sku AS k, locked AS v FROM t_sku_stock`); err != nil {
		return
	}
	if goods, err = read(`SELECT id AS k, stock AS v FROM t_goods`); err != nil {
		return
	}
	points, err = read(`SELECT id AS k, points AS v FROM t_member`)
	return
}

// foreignCouponSQL finds coupon rows not as their order's status says: an
// unpaid or paid order's coupon must be used, a cancelled one's unused,
// and each order with a coupon matches exactly one row.
const foreignCouponSQL = `
SELECT o.order_sn AS sn, o.order_status AS status, COUNT(h.id) AS n, COALESCE(SUM(h.use_status), 0) AS used
FROM t_order o LEFT JOIN t_coupon_history h ON h.member_id = o.member_id AND h.coupon_id = o.coupon_id
WHERE o.coupon_id IS NOT NULL
GROUP BY o.id
HAVING n <> 1 OR used <> IF(o.order_status = 4, 0, 1)`

// CheckForeign checks the foreign shop against b after closes and
// payments, for a schema giving stock back as st says: the stock, coupon
// and points every unpaid order held are still held and those of every
// cancelled order given back exactly once (goods taken by paid orders stay
// taken); no order paid at the baseline or since is cancelled; every
// cancelled order has exactly one close-log row and its cancel time, and
// no close-log row names an order not cancelled.
func CheckForeign(ctx context.Context, db sqlx.QueryerContext, b *ForeignBaseline, st ForeignStock) error {
	return CheckForeignStamped(ctx, db, b, st, "cancel_time", "updated_at")
}

// CheckForeignStamped is CheckForeign for a schema stamping the close in
// columns closeTime and updateTime of t_order (plain names).
func CheckForeignStamped(ctx context.Context, db sqlx.QueryerContext, b *ForeignBaseline, st ForeignStock, closeTime, updateTime string) error {
	var v []Violation
	add := func(rule, format string, args ...any) {
		v = append(v, Violation{Rule: rule, Detail: fmt.Sprintf(format, args...)})
	}
	now, err := SnapshotForeign(ctx, db)
	if err != nil {
		return err
	}
	cmp := func(rule string, want, got map[int64]int64) {
		for k, w := range want {
			if got[k] != w {
				add(rule, "key %d: %d held as if nothing were placed, want %d", k, got[k], w)
			}
		}
	}
	if st == LockedOnly {
		cmp("foreign_locked", b.locked, now.locked)
	} else {
		cmp("foreign_goods", b.goods, now.goods)
	}
	cmp("foreign_points", b.points, now.points)
	var bad []struct {
		Sn     string `db:"sn"`
		Status int    `db:"status"`
		N      int    `db:"n"`
		Used   int    `db:"used"`
	}
	if err := sqlx.SelectContext(ctx, db, &bad, foreignCouponSQL); err != nil {
		return fmt.Errorf("ordertest: foreign coupons: %w", err)
	}
	for _, c := range bad {
		add("foreign_coupon", "order %s (status %d): %d matching rows, %d used", c.Sn, c.Status, c.N, c.Used)
	}
	var n int
	q, args, err := sqlx.In(`SELECT COUNT(*) FROM t_order WHERE id IN (?) AND order_status <> 1`, append([]int64{0}, b.paid...))
	if err != nil {
		return err
	}
	if err := sqlx.GetContext(ctx, db, &n, q, args...); err != nil {
		return fmt.Errorf("ordertest: foreign paid orders: %w", err)
	}
	if n > 0 {
		add("foreign_paid_closed", "%d orders paid at the baseline are no longer paid", n)
	}
	for rule, q := range map[string]string{
		"foreign_close_log": `SELECT COUNT(*) FROM t_order o LEFT JOIN order_close_log l ON l.order_no = o.order_sn
			WHERE o.order_status = 4 AND (l.id IS NULL OR o.` + closeTime + ` IS NULL OR o.` + updateTime + ` IS NULL)`,
		"foreign_log_not_closed": `SELECT COUNT(*) FROM order_close_log l JOIN t_order o ON o.order_sn = l.order_no WHERE o.order_status <> 4`,
	} {
		if err := sqlx.GetContext(ctx, db, &n, q); err != nil {
			return fmt.Errorf("ordertest: %s: %w", rule, err)
		}
		if n > 0 {
			add(rule, "%d orders", n)
		}
	}
	if len(v) > 0 {
		return &ViolationsError{Violations: v}
	}
	return nil
}
