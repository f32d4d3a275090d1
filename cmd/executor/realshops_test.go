package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// Two widely used open-source shops, macrozheng/mall and linlinjava/litemall,
// declared in order.schema as they are (realshops_ddl_test.go), migrated
// with exactly the fixes `executor migrate` prints, and closed through the
// binary's `run orderTimeoutCloseJob` while payers pay random unpaid orders
// with the shop's own payment statements. Every order must end paid,
// closed, still unpaid and not due, or deleted and untouched; each closed
// order gives back exactly its quantities, coupon and points once; no paid
// order is closed; a second run changes nothing.

// shopKind is what a seeded order is when the close starts.
type shopKind int

const (
	kindDue     shopKind = iota // unpaid, past its deadline, live
	kindNotDue                  // unpaid, placed a minute ago
	kindPaid                    // paid before the close
	kindDeleted                 // unpaid, past its deadline, soft-deleted
)

type shopItem struct{ sku, qty int64 }

// shopOrder is one seeded order and what it holds.
type shopOrder struct {
	id     int64
	sn     string
	user   int64
	kind   shopKind
	items  []shopItem
	coupon int64 // the coupon row's id (mall: the coupon's, coupon_id); 0: no coupon
	points int64 // points used on the order (mall)
	// unpayable orders are left out of the racing payments (the mall's
	// copies of one coupon, whose close the test must see).
	unpayable bool
}

// seeded is the order's status, unpaid or paid as the shop numbers them,
// and its soft-delete flag (1 deleted) as placed.
func (o *shopOrder) seeded(unpaid, paid int) (status, deleted int) {
	switch o.kind {
	case kindPaid:
		return paid, 0
	case kindDeleted:
		return unpaid, 1
	}
	return unpaid, 0
}

// realShop is one shop: its tables, its declaration, the fixes migrate
// asks a DBA for, and its own statements for placing and paying orders.
type realShop struct {
	prefix  string
	ddl     []string
	yaml    string
	fixes   []string // the CREATE statements migrate prints, in order
	timeout string   // the query reading the shop's own payment timeout (minutes)
	seed    []string // stock rows, members
	place   func(ctx context.Context, tx *sqlx.Tx, o *shopOrder, age time.Duration) error
	pay     func(ctx context.Context, db *sqlx.DB, o *shopOrder) (bool, error)
	// state reads every value a close or a payment may change, as rows
	// of a name (k) and a value (v).
	state []string
	// closed and paid are the changes to state a close or a payment of o
	// makes.
	closed, paid func(o *shopOrder) map[string]int64
	// extra are orders seedRealShop places before its 300, past their
	// deadline (their sn the shop's prefix and their own).
	extra []shopOrder
}

var mallShop = realShop{
	prefix: "MALL",
	ddl:    mallDDL,
	yaml:   mallYAML,
	fixes: []string{
		"CREATE UNIQUE INDEX `uk_order_sn` ON `oms_order` (`order_sn`) ALGORITHM=INPLACE LOCK=NONE",
		"CREATE INDEX `idx_status_create_time` ON `oms_order` (`status`, `create_time`, `id`) ALGORITHM=INPLACE LOCK=NONE",
		"CREATE INDEX `idx_order_id` ON `oms_order_item` (`order_id`) ALGORITHM=INPLACE LOCK=NONE",
		"CREATE INDEX `idx_member_coupon` ON `sms_coupon_history` (`member_id`, `coupon_id`) ALGORITHM=INPLACE LOCK=NONE",
	},
	timeout: "SELECT normal_order_overtime FROM oms_order_setting WHERE id = 1",
	// Member 1 holds three copies of coupon 999 (the mall takes the first
	// unused one of member and coupon): two used by due orders, one by a
	// paid order. Each due order gives back one copy (coupon.anyCopy).
	extra: mallCopies,
	seed: []string{
		"INSERT INTO pms_sku_stock (id, product_id, sku_code, price, stock, low_stock, sale, lock_stock, sp_data) " +
			"SELECT seq, 26, CONCAT('20260101', LPAD(seq, 4, '0')), 99.00, 100000, 0, 0, 0, '[]' FROM seq_1_to_12",
		"INSERT INTO ums_member (id, member_level_id, username, password, nickname, phone, status, create_time, integration, growth) " +
			"SELECT seq, 4, CONCAT('member', seq), 'x', CONCAT('m', seq), CONCAT('1380000', LPAD(seq, 4, '0')), 1, NOW(), 100000, 0 FROM seq_1_to_20",
	},
	// PortalOrderServiceImpl.generateOrder: the order and its items, the
	// SKUs' lock_stock raised, the member's coupon history row marked used,
	// the points taken from the member.
	// The member holds a copy of the coupon per order using it: copies are
	// interchangeable, so the state counts them per member and coupon.
	place: func(ctx context.Context, tx *sqlx.Tx, o *shopOrder, age time.Duration) error {
		status, deleted := o.seeded(0, 1)
		var couponID, useIntegration any
		if o.coupon != 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO sms_coupon_history (coupon_id, member_id, coupon_code, member_nickname,
				get_type, create_time, use_status, use_time) VALUES (?, ?, ?, ?, 1, NOW() - INTERVAL 1 DAY, 1, NOW())`,
				o.coupon, o.user, fmt.Sprintf("CODE%d", o.coupon), fmt.Sprintf("m%d", o.user)); err != nil {
				return err
			}
			couponID = o.coupon
		}
		if o.points != 0 {
			useIntegration = o.points
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO oms_order (member_id, coupon_id, order_sn, create_time, member_username,
			total_amount, pay_amount, freight_amount, promotion_amount, integration_amount, coupon_amount, discount_amount,
			pay_type, source_type, status, order_type, auto_confirm_day, integration, growth, promotion_info,
			receiver_name, receiver_phone, receiver_province, receiver_city, receiver_region, receiver_detail_address,
			confirm_status, delete_status, use_integration, payment_time)
			VALUES (?, ?, ?, NOW() - INTERVAL ? SECOND, ?, 99.00, 99.00, 0, 0, 0, 0, 0, ?, 1, ?, 0, 15, 0, 0, '无优惠',
			'大梨', '18033441849', '广东省', '深圳市', '福田区', '东晓街道', 0, ?, ?, IF(? = 1, NOW(), NULL))`,
			o.user, couponID, o.sn, int64(age/time.Second), fmt.Sprintf("member%d", o.user), status, status, deleted,
			useIntegration, status)
		if err != nil {
			return err
		}
		if o.id, err = res.LastInsertId(); err != nil {
			return err
		}
		for _, it := range o.items {
			if _, err := tx.ExecContext(ctx, `INSERT INTO oms_order_item (order_id, order_sn, product_id, product_name,
				product_price, product_quantity, product_sku_id, product_sku_code, real_amount, product_attr)
				VALUES (?, ?, 26, '华为 HUAWEI P20', 99.00, ?, ?, CONCAT('20260101', LPAD(?, 4, '0')), 99.00, '[]')`,
				o.id, o.sn, it.qty, it.sku, it.sku); err != nil {
				return err
			}
			// lockStock; a paid order's lock was released by its payment,
			// which took the stock.
			q := `UPDATE pms_sku_stock SET lock_stock = lock_stock + ? WHERE id = ?`
			if o.kind == kindPaid {
				q = `UPDATE pms_sku_stock SET stock = stock - ? WHERE id = ?`
			}
			if _, err := tx.ExecContext(ctx, q, it.qty, it.sku); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE ums_member SET integration = integration - ? WHERE id = ?`, o.points, o.user)
		return err
	},
	// PortalOrderServiceImpl.paySuccess (one transaction): the order from
	// unpaid to paid if it is live and unpaid, then reduceSkuStock for its
	// items; the coupon history row stays used.
	pay: func(ctx context.Context, db *sqlx.DB, o *shopOrder) (bool, error) {
		return inTx(ctx, db, func(tx *sqlx.Tx) (bool, error) {
			res, err := tx.ExecContext(ctx, `UPDATE oms_order SET status = 1, payment_time = NOW(), pay_type = 2
				WHERE id = ? AND delete_status = 0 AND status = 0`, o.id)
			if err != nil {
				return false, fmt.Errorf("order paid: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return false, err
			}
			var items []struct {
				SKU int64 `db:"product_sku_id"`
				Qty int64 `db:"product_quantity"`
			}
			if err := tx.SelectContext(ctx, &items, `SELECT product_sku_id, product_quantity FROM oms_order_item WHERE order_id = ?`,
				o.id); err != nil {
				return false, err
			}
			for _, it := range items {
				res, err := tx.ExecContext(ctx, `UPDATE pms_sku_stock SET lock_stock = lock_stock - ?, stock = stock - ?
					WHERE id = ? AND stock - ? >= 0 AND lock_stock - ? >= 0`, it.Qty, it.Qty, it.SKU, it.Qty, it.Qty)
				if err != nil {
					return false, fmt.Errorf("reduceSkuStock of sku %d: %w", it.SKU, err)
				}
				if n, err := res.RowsAffected(); err != nil || n != 1 {
					return false, fmt.Errorf("reduceSkuStock of sku %d: %d rows, %w", it.SKU, n, err)
				}
			}
			return true, nil
		})
	},
	state: []string{
		"SELECT CONCAT('order ', order_sn) AS k, status AS v FROM oms_order",
		"SELECT CONCAT('order ', order_sn, ' modified') AS k, modify_time IS NOT NULL AS v FROM oms_order",
		"SELECT CONCAT('order ', order_sn, ' paid at') AS k, payment_time IS NOT NULL AS v FROM oms_order",
		"SELECT CONCAT('sku ', id, ' stock') AS k, stock AS v FROM pms_sku_stock",
		"SELECT CONCAT('sku ', id, ' lock_stock') AS k, lock_stock AS v FROM pms_sku_stock",
		"SELECT CONCAT('coupon ', member_id, '/', coupon_id, ' used') AS k, SUM(use_status = 1) AS v FROM sms_coupon_history GROUP BY member_id, coupon_id",
		"SELECT CONCAT('coupon ', member_id, '/', coupon_id, ' unused') AS k, SUM(use_status = 0) AS v FROM sms_coupon_history GROUP BY member_id, coupon_id",
		"SELECT CONCAT('member ', id, ' integration') AS k, integration AS v FROM ums_member",
	},
	// cancelOrder: status 4, lock_stock released, coupon unused, points back.
	closed: func(o *shopOrder) map[string]int64 {
		d := map[string]int64{"order " + o.sn: 4, "order " + o.sn + " modified": 1,
			fmt.Sprintf("member %d integration", o.user): o.points}
		for _, it := range o.items {
			d[fmt.Sprintf("sku %d lock_stock", it.sku)] -= it.qty
		}
		if o.coupon != 0 {
			d[fmt.Sprintf("coupon %d/%d used", o.user, o.coupon)] = -1
			d[fmt.Sprintf("coupon %d/%d unused", o.user, o.coupon)] = 1
		}
		return d
	},
	paid: func(o *shopOrder) map[string]int64 {
		d := map[string]int64{"order " + o.sn: 1, "order " + o.sn + " paid at": 1}
		for _, it := range o.items {
			d[fmt.Sprintf("sku %d stock", it.sku)] -= it.qty
			d[fmt.Sprintf("sku %d lock_stock", it.sku)] -= it.qty
		}
		return d
	},
}

var litemallShop = realShop{
	prefix: "LM",
	ddl:    litemallDDL,
	yaml:   litemallYAML,
	fixes: []string{
		"CREATE UNIQUE INDEX `uk_order_sn` ON `litemall_order` (`order_sn`) ALGORITHM=INPLACE LOCK=NONE",
		"CREATE INDEX `idx_status_add_time` ON `litemall_order` (`order_status`, `add_time`, `id`) ALGORITHM=INPLACE LOCK=NONE",
		"CREATE INDEX `idx_order_id` ON `litemall_coupon_user` (`order_id`) ALGORITHM=INPLACE LOCK=NONE",
	},
	timeout: "SELECT CAST(key_value AS UNSIGNED) FROM litemall_system WHERE key_name = 'litemall_order_unpaid' AND deleted = 0",
	seed: []string{
		"INSERT INTO litemall_goods_product (id, goods_id, specifications, price, number, url, add_time, update_time) " +
			"SELECT seq, 1181000, '[\"标准\"]', 999.00, 100000, '', NOW(), NOW() FROM seq_1_to_12",
	},
	// WxOrderService.submit: the order (update_time = add_time), its goods,
	// each product's number reduced (reduceStock), the coupon user row
	// marked used by this order.
	place: func(ctx context.Context, tx *sqlx.Tx, o *shopOrder, age time.Duration) error {
		status, deleted := o.seeded(101, 201)
		res, err := tx.ExecContext(ctx, `INSERT INTO litemall_order (user_id, order_sn, order_status, consignee, mobile, address,
			message, goods_price, freight_price, coupon_price, integral_price, groupon_price, order_price, actual_price,
			pay_time, add_time, update_time, deleted)
			VALUES (?, ?, ?, '张三', '13000000000', '北京市东城区', '', 999.00, 0, 0, 0, 0, 999.00, 999.00,
			IF(? = 201, NOW(), NULL), NOW() - INTERVAL ? SECOND, NOW() - INTERVAL ? SECOND, ?)`,
			o.user, o.sn, status, status, int64(age/time.Second), int64(age/time.Second), deleted)
		if err != nil {
			return err
		}
		if o.id, err = res.LastInsertId(); err != nil {
			return err
		}
		for _, it := range o.items {
			if _, err := tx.ExecContext(ctx, `INSERT INTO litemall_order_goods (order_id, goods_id, goods_name, goods_sn,
				product_id, number, price, specifications, pic_url, add_time, update_time)
				VALUES (?, 1181000, '母亲节礼物-舒适安睡组合', '1181000', ?, ?, 999.00, '["标准"]', '', NOW(), NOW())`,
				o.id, it.sku, it.qty); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, `UPDATE litemall_goods_product SET number = number - ?, update_time = NOW()
				WHERE id = ? AND number >= ?`, it.qty, it.sku, it.qty)
			if err != nil {
				return fmt.Errorf("reduceStock of product %d: %w", it.sku, err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return fmt.Errorf("reduceStock of product %d: %d rows, %w", it.sku, n, err)
			}
		}
		if o.coupon != 0 {
			res, err := tx.ExecContext(ctx, `INSERT INTO litemall_coupon_user (user_id, coupon_id, status, used_time,
				start_time, end_time, order_id, add_time, update_time) VALUES (?, ?, 1, NOW(), NOW() - INTERVAL 1 DAY,
				NOW() + INTERVAL 7 DAY, ?, NOW(), NOW())`, o.user, o.coupon, o.id)
			if err != nil {
				return err
			}
			if o.coupon, err = res.LastInsertId(); err != nil {
				return err
			}
		}
		return nil
	},
	// WxOrderService.payNotify: the order read by its number (deleted =
	// false, as every litemall query), refused unless 101, then
	// updateWithOptimisticLocker: WHERE id AND update_time as read.
	pay: func(ctx context.Context, db *sqlx.DB, o *shopOrder) (bool, error) {
		updated, ok, err := litemallPayRead(ctx, db, o)
		if err != nil || !ok {
			return false, err
		}
		return litemallPayUpdate(ctx, db, o, updated)
	},
	state: []string{
		"SELECT CONCAT('order ', order_sn) AS k, order_status AS v FROM litemall_order",
		"SELECT CONCAT('order ', order_sn, ' ended') AS k, end_time IS NOT NULL AS v FROM litemall_order",
		"SELECT CONCAT('order ', order_sn, ' paid at') AS k, pay_time IS NOT NULL AS v FROM litemall_order",
		"SELECT CONCAT('sku ', id, ' number') AS k, number AS v FROM litemall_goods_product",
		"SELECT CONCAT('coupon ', id) AS k, status AS v FROM litemall_coupon_user",
	},
	// OrderUnpaidTask: 103, end_time, number += quantity, coupon usable.
	closed: func(o *shopOrder) map[string]int64 {
		d := map[string]int64{"order " + o.sn: 2, "order " + o.sn + " ended": 1}
		for _, it := range o.items {
			d[fmt.Sprintf("sku %d number", it.sku)] += it.qty
		}
		if o.coupon != 0 {
			d[fmt.Sprintf("coupon %d", o.coupon)] = -1
		}
		return d
	},
	paid: func(o *shopOrder) map[string]int64 {
		return map[string]int64{"order " + o.sn: 100, "order " + o.sn + " paid at": 1}
	},
}

// litemallPayRead is the read of payNotify: the order's update_time, and
// whether it is live and unpaid.
func litemallPayRead(ctx context.Context, db *sqlx.DB, o *shopOrder) (sql.NullTime, bool, error) {
	var cur struct {
		Status  int          `db:"order_status"`
		Updated sql.NullTime `db:"update_time"`
	}
	err := db.GetContext(ctx, &cur, `SELECT order_status, update_time FROM litemall_order WHERE order_sn = ? AND deleted = 0`, o.sn)
	if errors.Is(err, sql.ErrNoRows) {
		return sql.NullTime{}, false, nil
	}
	return cur.Updated, err == nil && cur.Status == 101, err
}

// litemallPayUpdate is payNotify's updateWithOptimisticLocker: the order
// paid if its update_time is still as read; the status is not looked at.
func litemallPayUpdate(ctx context.Context, db *sqlx.DB, o *shopOrder, updated sql.NullTime) (bool, error) {
	res, err := db.ExecContext(ctx, `UPDATE litemall_order SET pay_id = ?, pay_time = NOW(), order_status = 201,
		update_time = NOW() WHERE id = ? AND update_time = ?`, "wx"+o.sn, o.id, updated)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func TestMallClosesWithPaymentsRacing(t *testing.T) { closeRealShop(t, mallShop) }

func TestLitemallClosesWithPaymentsRacing(t *testing.T) { closeRealShop(t, litemallShop) }

// realShopDB creates shop's tables in a new database, runs migrate, runs
// exactly the fixes it prints for the shop's tables and migrates again; it
// returns the database, the environment and the configuration file.
func realShopDB(t *testing.T, shop realShop) (*dbtest.DB, map[string]string, string) {
	t.Helper()
	ctx := context.Background()
	db := dbtest.NewEmpty(t)
	for _, s := range shop.ddl {
		_, err := db.ExecContext(ctx, s)
		require.NoError(t, err, s)
	}
	file := filepath.Join(t.TempDir(), "shop.yml")
	require.NoError(t, os.WriteFile(file, []byte(shop.yaml), 0o600))
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir()}

	// migrate creates the executor's tables and prints what the shop's
	// lack; a DBA runs exactly those statements.
	code, out, errOut := runCLI(t, env, "-config", file, "migrate")
	require.Equal(t, 1, code, out+errOut)
	fixes := regexp.MustCompile(`fix: (CREATE [^\n]*)`).FindAllStringSubmatch(errOut, -1)
	var got []string
	for _, f := range fixes {
		got = append(got, f[1])
	}
	require.Equal(t, shop.fixes, got, errOut)
	for _, s := range got {
		_, err := db.ExecContext(ctx, s)
		require.NoError(t, err, s)
	}
	code, out, errOut = runCLI(t, env, "-config", file, "migrate")
	require.Equal(t, 0, code, out+errOut)
	return db, env, file
}

func closeRealShop(t *testing.T, shop realShop) {
	db, env, file := realShopDB(t, shop)
	// The declared timeout is the shop's own setting.
	minutes := db.Count(t, shop.timeout)
	require.Contains(t, shop.yaml, fmt.Sprintf("timeoutMinutes: %d ", minutes))
	orders := seedRealShop(t, db, shop, time.Duration(minutes)*time.Minute)
	base := realShopState(t, db, shop)

	var code int
	var out, errOut string
	paid := payWhileRunning(t, db, shop, orders, func() {
		code, out, errOut = runCLI(t, env, "-config", file, "run", "orderTimeoutCloseJob", "-param", "pageSize=10,maxPerSecond=150")
	})
	require.Equal(t, 0, code, out+errOut)
	t.Logf("the run racing the payers: %s", regexp.MustCompile(`scanned=\d+ closed=\d+ skipped_paid=[^\n]*`).FindString(out))

	want := maps.Clone(base)
	closed, payments := 0, 0
	for i, o := range orders {
		var d map[string]int64
		switch {
		case paid[i]:
			require.Contains(t, []shopKind{kindDue, kindNotDue}, o.kind, "%s paid", o.sn)
			d = shop.paid(o)
			payments++
		case o.kind == kindDue:
			d = shop.closed(o)
			closed++
		}
		for k, v := range d {
			want[k] += v
		}
	}
	require.Equal(t, want, realShopState(t, db, shop), "every order paid, closed, not due or deleted and untouched; givebacks exactly once")
	require.Contains(t, out, fmt.Sprintf(" closed=%d ", closed))
	require.Equal(t, closed, db.Count(t, `SELECT COUNT(DISTINCT order_no) FROM order_close_log`))
	require.Equal(t, closed, db.Count(t, `SELECT COUNT(*) FROM order_close_log`))
	require.Zero(t, db.Count(t, `SELECT COUNT(*) FROM order_dead_letter`))
	require.NotZero(t, payments)
	t.Logf("%d orders: %d paid while closing, %d closed", len(orders), payments, closed)

	// A second run finds nothing and changes nothing.
	code, out, errOut = runCLI(t, env, "-config", file, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "scanned=0 closed=0 ")
	require.Equal(t, want, realShopState(t, db, shop))
	require.Equal(t, closed, db.Count(t, `SELECT COUNT(*) FROM order_close_log`))
}

// seedRealShop places 300 orders with the shop's own statements: 210 due
// and live, 30 not due, 30 paid, 30 due and soft-deleted; one to three
// lines over 12 SKUs, a coupon on every other order, points on three in
// four (the mall's; litemall has none).
func seedRealShop(t *testing.T, db *dbtest.DB, shop realShop, timeout time.Duration) []*shopOrder {
	t.Helper()
	ctx := context.Background()
	_, err := db.ExecContext(ctx, `SELECT 1 FROM seq_1_to_12 LIMIT 1`)
	require.NoError(t, err, "MariaDB's sequence engine")
	for _, s := range shop.seed {
		_, err := db.ExecContext(ctx, s)
		require.NoError(t, err, s)
	}
	const n = 300
	orders := make([]*shopOrder, n, n+len(shop.extra))
	tx, err := db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	for i := range shop.extra {
		o := shop.extra[i]
		o.sn = shop.prefix + o.sn
		require.NoError(t, shop.place(ctx, tx, &o, timeout+5*time.Minute), o.sn)
		orders = append(orders, &o)
	}
	for i := range n {
		o := &shopOrder{sn: fmt.Sprintf("%s%06d", shop.prefix, i), user: int64(1 + i%20), kind: kindDue}
		switch i % 10 {
		case 7:
			o.kind = kindNotDue
		case 8:
			o.kind = kindPaid
		case 9:
			o.kind = kindDeleted
		}
		for l := range 1 + i%3 {
			o.items = append(o.items, shopItem{sku: int64(1 + (i+5*l)%12), qty: int64(1 + (i+l)%4)})
		}
		if i%2 == 0 {
			o.coupon = int64(100 + i)
		}
		if shop.prefix == mallShop.prefix {
			o.points = int64(i%4) * 100
		}
		age := time.Minute
		if o.kind != kindNotDue {
			age = timeout + 5*time.Minute + time.Duration(i)*time.Second
		}
		require.NoError(t, shop.place(ctx, tx, o, age), o.sn)
		orders[i] = o
	}
	require.NoError(t, tx.Commit())
	return orders
}

// payWhileRunning pays half of the unpaid orders (due, not due, deleted),
// picked at random, with shop.pay from four payers spread over about a
// second, while run runs the close; it returns which orders were paid.
func payWhileRunning(t *testing.T, db *dbtest.DB, shop realShop, orders []*shopOrder, run func()) []bool {
	t.Helper()
	var unpaid []int
	for i, o := range orders {
		if o.kind != kindPaid && !o.unpayable {
			unpaid = append(unpaid, i)
		}
	}
	rand.Shuffle(len(unpaid), func(a, b int) { unpaid[a], unpaid[b] = unpaid[b], unpaid[a] })
	paid := make([]bool, len(orders))
	var deadlocks atomic.Int64
	var wg sync.WaitGroup
	for part := range slices.Chunk(unpaid[:len(unpaid)/2], len(unpaid)/8+1) {
		wg.Go(func() {
			for _, i := range part {
				time.Sleep(rand.N(60 * time.Millisecond))
				ok, err := shop.pay(context.Background(), db.DB, orders[i])
				// The shop's payment locks the order, then its SKUs in line
				// order: it can deadlock with the close or another payment.
				// InnoDB rolls it back whole and the payment provider
				// notifies again, as the shop expects.
				for tries := 0; dbserver.ServerMariaDB.Retryable(err) && tries < 10; tries++ {
					deadlocks.Add(1)
					ok, err = shop.pay(context.Background(), db.DB, orders[i])
				}
				if err != nil {
					t.Errorf("pay %s: %v", orders[i].sn, err)
					return
				}
				paid[i] = ok
			}
		})
	}
	run()
	wg.Wait()
	t.Logf("payments retried after a deadlock: %d", deadlocks.Load())
	return paid
}

// realShopState reads shop.state: every value a close or a payment may
// change, by name.
func realShopState(t *testing.T, db *dbtest.DB, shop realShop) map[string]int64 {
	t.Helper()
	state := map[string]int64{}
	for _, q := range shop.state {
		var rows []struct {
			K string        `db:"k"`
			V sql.NullInt64 `db:"v"`
		}
		require.NoError(t, db.Select(&rows, q), q)
		for _, r := range rows {
			state[r.K] = r.V.Int64
		}
	}
	return state
}

// inTx runs f in a transaction, committed when f reports true.
func inTx(ctx context.Context, db *sqlx.DB, f func(*sqlx.Tx) (bool, error)) (bool, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	ok, err := f(tx)
	if err != nil || !ok {
		return false, err
	}
	return true, tx.Commit()
}

// litemall's payment locks on update_time, not on the status: a payment
// that read an unpaid order before the close claimed it still pays it
// unless the close stamps update_time. Declared, the payment fails; with
// updateTime left out, the closed order (its stock already given back)
// is paid.
func TestLitemallPaymentNeedsTheCloseToStampUpdateTime(t *testing.T) {
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("updateTime declared %v", declared), func(t *testing.T) {
			db, env, file := realShopDB(t, litemallShop)
			ctx := context.Background()
			if !declared {
				env["ORDER_SCHEMA_UPDATE_TIME"] = ""
			}
			for _, s := range litemallShop.seed {
				_, err := db.ExecContext(ctx, s)
				require.NoError(t, err, s)
			}
			o := &shopOrder{sn: "LM-1", user: 1, kind: kindDue, items: []shopItem{{sku: 1, qty: 2}}}
			tx, err := db.BeginTxx(ctx, nil)
			require.NoError(t, err)
			require.NoError(t, litemallShop.place(ctx, tx, o, time.Hour))
			require.NoError(t, tx.Commit())

			updated, ok, err := litemallPayRead(ctx, db.DB, o)
			require.NoError(t, err)
			require.True(t, ok, "unpaid when the payment reads it")
			code, out, errOut := runCLI(t, env, "-config", file, "run", "orderTimeoutCloseJob")
			require.Equal(t, 0, code, out+errOut)
			require.Contains(t, out, "scanned=1 closed=1 ")
			require.Equal(t, 100000, db.Count(t, `SELECT number FROM litemall_goods_product WHERE id = 1`), "stock given back")

			paid, err := litemallPayUpdate(ctx, db.DB, o, updated)
			require.NoError(t, err)
			status := db.Count(t, `SELECT order_status FROM litemall_order WHERE id = ?`, o.id)
			if declared {
				require.False(t, paid)
				require.Equal(t, 103, status)
			} else {
				require.True(t, paid, "the payment's optimistic lock does not see the close")
				require.Equal(t, 201, status, "a closed order, its stock given back, is paid")
			}
		})
	}
}
