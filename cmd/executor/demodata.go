package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/internal/orderdemo"
)

func demoDataCommand() *command {
	return &command{name: "demo-data", flags: demoDataFlags,
		summary: "create demo orders, stock and coupons so you can watch the job work"}
}

func demoDataFlags(fs *flag.FlagSet, env *cliEnv) runFunc {
	n := fs.Int("orders", 5000, "orders to create")
	skus := fs.Int("skus", 200, "SKUs the items are drawn from")
	due := fs.Float64("due", 0.8, "fraction of orders unpaid and past their deadline")
	paid := fs.Float64("paid", 0.1, "fraction of orders already paid")
	coupons := fs.Float64("coupons", 0.3, "fraction of orders holding a coupon")
	reset := fs.Bool("reset", false, "empty the order tables first; refused unless every row in them is demo data")
	resetDB := fs.String("reset-database", "", "with -reset: empty them whatever they hold; must equal the DSN's database name")
	return func(ctx context.Context, _ []string) error {
		return demoData(ctx, env, orderdemo.Spec{Orders: *n, SKUs: *skus, DueFraction: *due, PaidFraction: *paid,
			CouponFraction: *coupons, Reset: *reset, ResetDatabase: *resetDB})
	}
}

// maxDemoRows bounds -orders and -skus: demo-data writes a row per SKU
// (and keeps two counters per SKU in memory), so -skus 2000000000 ran for
// hours before.
const maxDemoRows = 10_000_000

// demoData checks the spec's numbers and generates the data.
func demoData(ctx context.Context, env *cliEnv, spec orderdemo.Spec) error {
	n, skus, due, paid, coupons := &spec.Orders, &spec.SKUs, &spec.DueFraction, &spec.PaidFraction, &spec.CouponFraction
	// The fractions are checked as in range, not as out of it: NaN (which
	// -due NaN parses to) compares false either way.
	fraction := func(f float64) bool { return f >= 0 && f <= 1 }
	switch {
	case *n < 1 || *n > maxDemoRows:
		return usagef("-orders %d: want 1 to %d", *n, maxDemoRows)
	case *skus < 1 || *skus > maxDemoRows:
		return usagef("-skus %d: want 1 to %d", *skus, maxDemoRows)
	case !fraction(*due) || !fraction(*paid) || !fraction(*coupons) || orderdemo.Remainder(*due, *paid) < 0:
		return usagef("-due, -paid and -coupons are fractions from 0 to 1, and -due + -paid must not exceed 1")
	case spec.ResetDatabase != "" && !spec.Reset:
		return usagef("-reset-database confirms -reset, which is not given")
	}
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	if t := cfg.Order.Schema.Table; t != "" {
		return fmt.Errorf("order.schema declares the shop's own tables (order table %s): demo data is written only into "+
			"the executor's own schema (order_info and its neighbours), never into a shop's tables. Run demo-data against "+
			"a database of its own with no order.schema section (docs/demo-data.md)", t)
	}
	db, err := app.OpenDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	spec.NotDueFraction = orderdemo.Remainder(*due, *paid)
	spec.TimeoutMinutes = cfg.Order.Timeout.PaymentTimeoutMinutes
	res, err := orderdemo.Generate(ctx, db, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "created %d orders (ids %d-%d): %d due, %d paid, %d not yet due; %d items over %d SKUs; %d with a coupon\n",
		res.Orders, res.FirstID, res.LastID, res.Due, res.Paid, res.NotDue, res.Items, *skus, res.Coupons)
	return nil
}
