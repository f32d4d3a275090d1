package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/sql/migrations"
)

// benchShopOrders due orders of one line each are closed in pages of
// benchShopPage by each run of BenchmarkRealShopCloseByMatch.
const (
	benchShopOrders = 5000
	benchShopPage   = 500
)

// benchShopCase is one shop and how its benchmark orders hold coupons.
type benchShopCase struct {
	name string
	shop realShop
	// seed fills the shop's tables: stock and members, then due live
	// orders of one line each, ids 1 to {n} (the order count), with their
	// coupons as the case says.
	seed []string
	// used counts the coupon rows still used: none once every order closed.
	used string
}

// litemallBench places litemall's orders, user 1 + id % 200, the line
// one of 100 products; with a coupon user row naming the order (status 1)
// on the orders where couponIf (SQL over seq, the order id) holds.
func litemallBench(name, couponIf string) benchShopCase {
	return benchShopCase{name: "litemall/" + name, shop: litemallShop,
		seed: []string{
			"INSERT INTO litemall_goods_product (id, goods_id, specifications, price, number, url, add_time, update_time) " +
				"SELECT seq, 1181000, '[\"标准\"]', 999.00, 100000, '', NOW(), NOW() FROM seq_1_to_100",
			"INSERT INTO litemall_order (id, user_id, order_sn, order_status, consignee, mobile, address, message, goods_price, " +
				"freight_price, coupon_price, integral_price, groupon_price, order_price, actual_price, add_time, update_time, deleted) " +
				"SELECT seq, 1 + seq % 200, CONCAT('LM', LPAD(seq, 6, '0')), 101, '张三', '13000000000', '北京市东城区', '', 999.00, " +
				"0, 0, 0, 0, 999.00, 999.00, NOW() - INTERVAL 1 HOUR - INTERVAL seq SECOND, NOW() - INTERVAL 1 HOUR, 0 FROM seq_1_to_{n}",
			"INSERT INTO litemall_order_goods (order_id, goods_id, goods_name, goods_sn, product_id, number, price, specifications, " +
				"pic_url, add_time, update_time) SELECT seq, 1181000, '母亲节礼物-舒适安睡组合', '1181000', 1 + seq % 100, 1 + seq % 3, " +
				"999.00, '[\"标准\"]', '', NOW(), NOW() FROM seq_1_to_{n}",
			"INSERT INTO litemall_coupon_user (user_id, coupon_id, status, used_time, start_time, end_time, order_id, add_time, update_time) " +
				"SELECT 1 + seq % 200, 100 + seq, 1, NOW(), NOW() - INTERVAL 1 DAY, NOW() + INTERVAL 7 DAY, seq, NOW(), NOW() " +
				"FROM seq_1_to_{n} WHERE " + couponIf,
			"ANALYZE TABLE litemall_order, litemall_order_goods, litemall_goods_product, litemall_coupon_user",
		},
		used: "SELECT COUNT(*) FROM litemall_coupon_user WHERE status = 1"}
}

// mallCopiesBench places the mall's orders, member 1 + id % 1000, the
// line one of 100 SKUs, each with coupon 999: every member holds one used
// copy of it per order (five), so each order matches its member's five
// used copies and the close gives each a distinct one (coupon.anyCopy).
var mallCopiesBench = benchShopCase{name: "mall/copies", shop: mallShop,
	seed: []string{
		"INSERT INTO pms_sku_stock (id, product_id, sku_code, price, stock, low_stock, sale, lock_stock, sp_data) " +
			"SELECT seq, 26, CONCAT('20260101', LPAD(seq, 4, '0')), 99.00, 100000, 0, 0, 100000, '[]' FROM seq_1_to_100",
		"INSERT INTO ums_member (id, member_level_id, username, password, nickname, phone, status, create_time, integration, growth) " +
			"SELECT seq, 4, CONCAT('member', seq), 'x', CONCAT('m', seq), CONCAT('1380', LPAD(seq, 7, '0')), 1, NOW(), 100000, 0 FROM seq_1_to_1000",
		"INSERT INTO oms_order (id, member_id, coupon_id, order_sn, create_time, member_username, total_amount, pay_amount, " +
			"freight_amount, promotion_amount, integration_amount, coupon_amount, discount_amount, pay_type, source_type, status, " +
			"order_type, auto_confirm_day, integration, growth, promotion_info, receiver_name, receiver_phone, confirm_status, " +
			"delete_status, use_integration) SELECT seq, 1 + seq % 1000, 999, CONCAT('MALL', LPAD(seq, 6, '0')), " +
			"NOW() - INTERVAL 3 HOUR - INTERVAL seq SECOND, CONCAT('member', 1 + seq % 1000), 99.00, 99.00, 0, 0, 0, 0, 0, 0, 1, 0, " +
			"0, 15, 0, 0, '无优惠', '大梨', '18033441849', 0, 0, 100 FROM seq_1_to_{n}",
		"INSERT INTO oms_order_item (order_id, order_sn, product_id, product_name, product_price, product_quantity, " +
			"product_sku_id, product_sku_code, real_amount, product_attr) SELECT seq, CONCAT('MALL', LPAD(seq, 6, '0')), 26, " +
			"'华为 HUAWEI P20', 99.00, 1 + seq % 3, 1 + seq % 100, '', 99.00, '[]' FROM seq_1_to_{n}",
		"INSERT INTO sms_coupon_history (coupon_id, member_id, coupon_code, member_nickname, get_type, create_time, use_status, use_time) " +
			"SELECT 999, 1 + seq % 1000, 'CODE999', CONCAT('m', 1 + seq % 1000), 1, NOW() - INTERVAL 1 DAY, 1, NOW() FROM seq_1_to_{n}",
		"ANALYZE TABLE oms_order, oms_order_item, pms_sku_stock, sms_coupon_history, ums_member",
	},
	used: "SELECT COUNT(*) FROM sms_coupon_history WHERE use_status = 1"}

// BenchmarkRealShopCloseByMatch closes 5,000 due orders of one line each
// in pages of 500 on the real shops' tables (realshops_ddl_test.go),
// declared as the shops are, through coupons found by coupon.match, and
// reports orders closed per second (ns/op is one run of 5,000). litemall:
// a coupon on every order (the guarded close: one locking read counting
// each order's used rows, then the one-statement restore), on every other
// order and on none (coupon.optional: the page's count finds orders
// without a row and the page is redone through the checked close); the
// mall: every order one of its member's five copies (coupon.anyCopy: a
// locking read chooses the copies). Each run gets a fresh database, made
// while the timer is stopped. docs/your-schema.md quotes its figures:
//
//	go test -run '^$' -bench BenchmarkRealShopCloseByMatch -benchtime 5x -count 3 ./cmd/executor
func BenchmarkRealShopCloseByMatch(b *testing.B) {
	for _, bc := range []benchShopCase{
		litemallBench("coupon_every_order", "TRUE"),
		litemallBench("coupon_every_other_order", "seq % 2 = 0"),
		litemallBench("no_coupon", "FALSE"),
		mallCopiesBench,
	} {
		b.Run(bc.name, func(b *testing.B) {
			closed, seconds := 0, 0.0
			for b.Loop() {
				b.StopTimer()
				db, c := benchShopCloser(b, bc)
				b.StartTimer()
				st, err := c.Run(context.Background(), orders.RunOptions{})
				b.StopTimer()
				require.NoError(b, err)
				require.Equal(b, benchShopOrders, st.Closed, st.String())
				require.Zero(b, db.Count(b, bc.used), "every coupon given back")
				closed += st.Closed
				seconds += st.Elapsed.Seconds()
				b.StartTimer()
			}
			b.ReportMetric(float64(closed)/seconds, "orders/s")
		})
	}
}

// benchShopCloser makes a fresh database with bc's shop tables, the
// indexes migrate asks for and the executor's tables, seeds bc's orders
// and returns it with a Closer of the shop's declared schema.
func benchShopCloser(b testing.TB, bc benchShopCase) (*dbtest.DB, *orders.Closer) {
	b.Helper()
	ctx := context.Background()
	db := dbtest.NewEmpty(b)
	_, err := migrations.Apply(ctx, db.DB.DB)
	require.NoError(b, err)
	seed := strings.NewReplacer("{n}", strconv.Itoa(benchShopOrders))
	for _, s := range append(append(append([]string{}, bc.shop.ddl...), bc.shop.fixes...), bc.seed...) {
		s = seed.Replace(s)
		_, err := db.ExecContext(ctx, s)
		require.NoError(b, err, s)
	}
	cfg, err := config.LoadWith([]byte(bc.shop.yaml), func(string) (string, bool) { return "", false })
	require.NoError(b, err)
	sch, err := cfg.Order.Schema.Schema()
	require.NoError(b, err)
	server, err := dbserver.DetectServer(ctx, db.DB)
	require.NoError(b, err)
	rdb, prefix := redistest.Client(b)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(b, err)
	c, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{Schema: sch, PageSize: benchShopPage, Server: server})
	require.NoError(b, err)
	return db, c
}
