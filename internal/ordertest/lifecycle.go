package ordertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/orderdemo"
)

// OrderState is what the steps after payment (paying, shipping, confirming,
// the lifecycle jobs) and a close may change of one order.
type OrderState struct {
	ID           int64      `db:"id"`
	OrderNo      string     `db:"order_no"`
	Status       int        `db:"status"`
	PayTime      *time.Time `db:"pay_time"`
	ShipTime     *time.Time `db:"ship_time"`
	CompleteTime *time.Time `db:"complete_time"`
	CloseTime    *time.Time `db:"close_time"`
	UpdateTime   time.Time  `db:"update_time"`
}

// States reads every order's OrderState, by order number.
func States(ctx context.Context, db sqlx.QueryerContext) (map[string]OrderState, error) {
	var rows []OrderState
	if err := sqlx.SelectContext(ctx, db, &rows,
		`SELECT id, order_no, status, pay_time, ship_time, complete_time, close_time, update_time FROM order_info`); err != nil {
		return nil, fmt.Errorf("read order states: %w", err)
	}
	out := make(map[string]OrderState, len(rows))
	for _, r := range rows {
		out[r.OrderNo] = r
	}
	return out, nil
}

// Shop fills db with demo data shaped as a shop's order tables are after a
// while, and fails t if it cannot: 20,000 orders on 2,000 SKUs, 60% unpaid
// and due, 30% paid, a third with coupons; most paid orders have a pay_time
// five minutes after their creation, a third of those are shipped an hour
// later, and a quarter of the paid ones left are flagged overdue. The plan
// tests of orders and orders/lifecycle start from it.
func Shop(t testing.TB, db *sqlx.DB) {
	t.Helper()
	ctx := context.Background()
	if _, err := orderdemo.Generate(ctx, db, orderdemo.Spec{Orders: 20000, SKUs: 2000, DueFraction: 0.6, PaidFraction: 0.3,
		NotDueFraction: 0.1, CouponFraction: 0.3}); err != nil {
		t.Fatalf("ordertest: shop: %v", err)
	}
	for _, stmt := range []string{
		`UPDATE order_info SET pay_time = create_time + INTERVAL 5 MINUTE WHERE status = 1 AND id % 5 <> 0`,
		`UPDATE order_info SET status = 3, ship_time = pay_time + INTERVAL 1 HOUR WHERE status = 1 AND pay_time IS NOT NULL AND id % 3 = 0`,
		`INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at)
			SELECT id, order_no, user_id, pay_time, pay_time + INTERVAL 3 DAY, NOW(3) FROM order_info WHERE status = 1 AND pay_time IS NOT NULL AND id % 4 = 0`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("ordertest: shop: %v", err)
		}
	}
}
