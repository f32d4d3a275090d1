package main

import (
	"context"
	"fmt"

	"github.com/orderjob/executor/internal/orderdemo"
)

func init() {
	register(command{
		name:    "demo-data",
		usage:   "-orders N -skus N -due F -coupons F [-paid F] [-reset [-reset-database NAME]]",
		summary: "create demo orders, stock and coupons so you can watch the job work",
		run:     cmdDemoData,
	})
}

func cmdDemoData(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "demo-data")
	n := fs.Int("orders", 5000, "orders to create")
	skus := fs.Int("skus", 200, "SKUs the items are drawn from")
	due := fs.Float64("due", 0.8, "fraction of orders unpaid and past their deadline")
	paid := fs.Float64("paid", 0.1, "fraction of orders already paid")
	coupons := fs.Float64("coupons", 0.3, "fraction of orders holding a coupon")
	reset := fs.Bool("reset", false, "empty the order tables first; refused unless every row in them is demo data")
	resetDB := fs.String("reset-database", "", "with -reset: empty them whatever they hold; must equal the DSN's database name")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case *n < 1 || *n > 10_000_000:
		return usagef("-orders %d: want 1 to 10000000", *n)
	case *skus < 1:
		return usagef("-skus %d: want at least 1", *skus)
	case *due < 0 || *paid < 0 || *coupons < 0 || *coupons > 1 || orderdemo.Remainder(*due, *paid) < 0:
		return usagef("-due, -paid and -coupons are fractions from 0 to 1, and -due + -paid must not exceed 1")
	}
	cfg, db, err := loadConfigDB(ctx, env)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := orderdemo.Generate(ctx, db, orderdemo.Spec{
		Orders:         *n,
		SKUs:           *skus,
		DueFraction:    *due,
		PaidFraction:   *paid,
		NotDueFraction: orderdemo.Remainder(*due, *paid),
		CouponFraction: *coupons,
		Reset:          *reset,
		ResetDatabase:  *resetDB,
		TimeoutMinutes: cfg.Order.Timeout.PaymentTimeoutMinutes,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "created %d orders (ids %d-%d): %d due, %d paid, %d not yet due; %d items over %d SKUs; %d with a coupon\n",
		res.Orders, res.FirstID, res.LastID, res.Due, res.Paid, res.NotDue, res.Items, *skus, res.Coupons)
	return nil
}
