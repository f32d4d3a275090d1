package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/syncbuf"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// screenshots, when set (make screenshots), is where the browser test
// writes its pictures of the console; otherwise they go to a temporary
// directory, so tests never write into the tree.
var screenshots = flag.String("console-screenshots", "", "directory for the console screenshots (make screenshots)")

// chromiumPath finds Debian's chromium (.ci/run installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed (apt-get install chromium; .ci/run does it): the console's browser test needs it")
	return ""
}

// sourcesDemo returns order.sources of two databases: db0 on db's, db1
// on another whose second order table holds order SRC-1, parked there.
func sourcesDemo(t *testing.T, ctx context.Context, db *dbtest.DB) string {
	t.Helper()
	other := dbtest.New(t)
	for _, stmt := range []string{`CREATE TABLE order_info_1 LIKE order_info`, `CREATE TABLE order_item_1 LIKE order_item`,
		`INSERT INTO order_info_1 (order_no, user_id, status, create_time, timeout_minutes) VALUES ('SRC-1', 5, 0, NOW() - INTERVAL 1 DAY, 30)`,
		`INSERT INTO order_item_1 (order_no, sku_id, quantity) VALUES ('SRC-1', 3, 1)`,
		`INSERT INTO order_dead_letter (order_no, order_table, stage, status, status_reason, last_error, attempts, next_retry_at)
			VALUES ('SRC-1', 'order_info_1', 'close', 'parked', 'parked after 1 failed attempts', 'close order SRC-1: boom', 1, NOW(3))`} {
		_, err := other.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	return fmt.Sprintf(`[{name: db0, dsn: %q, tables: order_info}, {name: db1, dsn: %q, tables: "order_info, order_info_1"}]`, db.DSN, other.DSN)
}

// consoleDemo fills db with what the console is for: due orders, a few
// whose close fails (their coupon is gone) and whose letters are parked
// after one attempt, a closed order paid late (a refund owed), and a
// delayed task out of retries.
func consoleDemo(t *testing.T, ctx context.Context, db *dbtest.DB, env map[string]string) []string {
	t.Helper()
	_, err := orderdemo.Generate(ctx, db.DB, orderdemo.Spec{Orders: 80, SKUs: 20, DueFraction: 0.6, PaidFraction: 0.2,
		NotDueFraction: 0.2, CouponFraction: 0.5, OrderNoPrefix: "SHOP"})
	require.NoError(t, err)
	var broken []string
	require.NoError(t, db.SelectContext(ctx, &broken, `SELECT order_no FROM order_info
		WHERE status = 0 AND coupon_id IS NOT NULL AND create_time + INTERVAL timeout_minutes MINUTE <= NOW() ORDER BY id LIMIT 3`))
	require.Len(t, broken, 3)
	for i, no := range broken {
		_, err := db.ExecContext(ctx, `UPDATE order_info SET coupon_id = ? WHERE order_no = ?`, 9_000_000+i, no)
		require.NoError(t, err)
	}
	env["ORDER_DEAD_LETTER_MAX_ATTEMPTS"] = "1"
	code, out, errOut := runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 1, code, "the run dead-letters the broken orders: %s %s", out, errOut)
	require.Contains(t, out, "dead_lettered=3")

	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	svc, err := payment.NewService(db.DB, locker, payment.ServiceConfig{})
	require.NoError(t, err)
	var closed string
	require.NoError(t, db.GetContext(ctx, &closed, `SELECT order_no FROM order_info WHERE status = 2 ORDER BY id LIMIT 1`))
	_, err = db.ExecContext(ctx, `UPDATE order_info SET pay_amount = 129.00 WHERE order_no = ?`, closed)
	require.NoError(t, err)
	out2, err := svc.Pay(ctx, closed)
	require.NoError(t, err)
	require.Equal(t, payment.AlreadyClosed, out2)

	_, err = db.ExecContext(ctx, `INSERT INTO job_delay_task (trace_id, biz_uuid, handler, execute_time, next_attempt_time,
		payload_json, status, retry_count, max_retry, last_error, claim_id, created_at, updated_at)
		VALUES ('4bf92f3577b34da6a3ce929d0e0e4736', 'order-timeout-SHOP-gone', 'orderTimeoutClose', UTC_TIMESTAMP(3) - INTERVAL 1 HOUR,
		UTC_TIMESTAMP(3) - INTERVAL 5 MINUTE, '{"orderNo":"SHOP-gone"}', 'FAILED', 4, 3,
		'close order SHOP-gone: payment side answered 503 four times', 0, UTC_TIMESTAMP(3) - INTERVAL 1 HOUR, UTC_TIMESTAMP(3) - INTERVAL 5 MINUTE)`)
	require.NoError(t, err)
	return broken
}

// The console in a real headless browser, on `executor serve`: sign in,
// read the overview, filter the dead letters, requeue one, and see both
// the page and the database say so.
func TestConsoleInBrowser(t *testing.T) {
	browserPath := chromiumPath(t)
	ctx := context.Background()
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	apiPort := freePort(t)
	env := map[string]string{
		"XXL_JOB_EXECUTOR_ENABLED":    "false",
		"XXL_JOB_EXECUTOR_LOGPATH":    t.TempDir(),
		"MYSQL_DSN":                   db.DSN,
		"REDIS_ADDR":                  redistest.Addr(),
		"ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX":            prefix + "delay:",
		"EXECUTOR_API_ADDR":           fmt.Sprintf("127.0.0.1:%d", apiPort),
		"EXECUTOR_API_TOKEN":          "api-token-0123456789",
		"EXECUTOR_API_CONSOLE_TOKENS": "alice:alice-console-token-1,bob:bob-console-token-22",
	}
	broken := consoleDemo(t, ctx, db, env)
	env["ORDER_SOURCES"] = sourcesDemo(t, ctx, db)
	for k, v := range env {
		t.Setenv(k, v)
	}
	var stdout, stderr syncbuf.Buffer
	sctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() { done <- run(sctx, []string{"serve"}, &stdout, &stderr) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}, 20*time.Second, 50*time.Millisecond, "serve did not answer: %s %s", stdout.String(), stderr.String())

	shots := *screenshots
	if shots == "" {
		shots = t.TempDir()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0],
		chromedp.ExecPath(browserPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first call starts the browser; the rest run under a deadline.
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate("about:blank")))
	bctx, cancelTimeout := context.WithTimeout(bctx, time.Minute)
	defer cancelTimeout()

	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(bctx, steps...), "stderr: %s", stderr.String())
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(css(sel)))
		require.NoError(t, err)
		return s
	}
	location := func() string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Location())
		require.NoError(t, err)
		return s
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name), png, 0o644))
	}

	// Unsigned, the console sends the browser to sign in.
	do(chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(css(`input[name=token]`)))
	require.Contains(t, location(), "/console/signin")
	do(chromedp.SendKeys(css(`input[name=token]`), "alice-console-token-1"), chromedp.Submit(css(`input[name=token]`)),
		chromedp.WaitVisible(css(`.cards`)))
	overview := text(`main`)
	shot("console-overview.png")
	for _, want := range []string{"Dead letters", "parked (need a person)", "Delayed tasks", "FAILED", "dead_lettered=3", "Refunds owed", "payments to pay back"} {
		require.Contains(t, overview, want)
	}
	require.Contains(t, text(`header`), "alice")

	// Filter: parked letters of the last hour whose error names the coupon
	// (the filter form's fields are in labels; the choice of source above
	// it keeps them as hidden fields).
	do(chromedp.Click(css(`a[href="/console/dead-letters?status=parked"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(css(`form.filters`)),
		chromedp.SetValue(css(`input[name=since]`), "1h"),
		chromedp.SetValue(css(`input[name=error]`), "coupon"),
		chromedp.Submit(css(`input[name=error]`)),
		chromedp.WaitVisible(css(`label input[name=error][value=coupon]`)))
	require.Contains(t, location(), "error=coupon")
	list := text(`table`)
	for _, no := range broken {
		require.Contains(t, list, no)
	}
	require.Equal(t, 3, strings.Count(list, "parked"), list)

	// Open the first letter, requeue it: confirm, then the result.
	do(chromedp.Click(css(`tbody tr:first-child td:first-child a`), chromedp.NodeVisible), chromedp.WaitVisible(css(`pre`)))
	detail := text(`main`)
	shot("console-dead-letter.png")
	do(chromedp.Click(css(`form[action$="/requeue"] button`), chromedp.NodeVisible),
		chromedp.Query(css(`input[name=confirm]`), chromedp.NodeReady))
	confirm := text(`main`)
	do(chromedp.Click(css(`main form[action$="/requeue"] button`), chromedp.NodeVisible), chromedp.WaitVisible(css(`p.notice`)))
	result := text(`main`)
	var requeued string
	for _, no := range broken {
		if strings.Contains(detail, "Dead letter") && strings.Contains(detail, no) {
			requeued = no
		}
	}
	require.NotEmpty(t, requeued, detail)
	require.Contains(t, detail, "coupon")
	require.Contains(t, detail, "Order row")
	require.Contains(t, confirm, "Confirm: requeue the close dead letter of order "+requeued)
	require.Contains(t, result, "Done: requeued the close dead letter of order "+requeued)
	require.Regexp(t, `status\s+parked\s+waiting`, result)

	statuses := map[string]string{}
	rows, err := db.QueryContext(ctx, `SELECT order_no, status FROM order_dead_letter`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var no, st string
		require.NoError(t, rows.Scan(&no, &st))
		statuses[no] = st
	}
	require.NoError(t, rows.Err())
	for _, no := range broken {
		want := "parked"
		if no == requeued {
			want = "waiting"
		}
		require.Equal(t, want, statuses[no], no)
	}
	require.Contains(t, stdout.String(), `"msg":"console action","component":"api.console","operator":"alice","action":"requeue dead letter","target":"`+requeued+`"`)
	// Another order database: the selector lists db1's letters, with the
	// table each names; its order opens in db1's second order table.
	do(chromedp.Navigate(base+"/console/dead-letters?status=parked"), chromedp.WaitVisible(css(`form.source select`)),
		chromedp.SetValue(css(`form.source select`), "db1"), chromedp.Submit(css(`form.source select`)),
		chromedp.Query(css(`form.filters input[name=source][value=db1]`), chromedp.NodeReady))
	require.Contains(t, location(), "source=db1")
	shot("console-source.png")
	list = text(`table`)
	require.Contains(t, list, "SRC-1")
	require.Contains(t, list, "order_info_1")
	require.NotContains(t, list, broken[0])
	do(chromedp.Click(css(`a[href="/console/orders/SRC-1?source=db1"]`), chromedp.NodeVisible), chromedp.WaitVisible(css(`dl.fields`)))
	require.Contains(t, text(`main`), "Found in the order table order_info_1 of order source db1.")

	// On a phone's screen no page is wider than the screen: wide tables
	// scroll inside their own box.
	// Measured against the screen's width, not window.innerWidth: a
	// phone widens its viewport to a page wider than the screen. Every
	// element outside a table's scrolling box counts.
	for _, width := range []int64{390, 320} {
		do(chromedp.EmulateViewport(width, 844, chromedp.EmulateMobile))
		overflow := fmt.Sprintf(`[document.documentElement, ...document.querySelectorAll("body *")].filter(e => !e.closest(".table > table") &&
			(e === document.documentElement ? e.scrollWidth : e.getBoundingClientRect().right) > %d + 1).map(e => e.tagName + "." + e.className).join(" ")`, width)
		for _, path := range []string{"/console/", "/console/dead-letters?status=parked", "/console/dead-letters/1", "/console/tasks",
			"/console/runs", "/console/outbox", "/console/refunds", "/console/fulfilment", "/console/orders/" + requeued,
			"/console/orders", "/console/dead-letters?status=parked&source=db1", "/console/orders/SRC-1?source=db1"} {
			do(chromedp.Navigate(base+path), chromedp.WaitVisible(css(`main`)))
			out, err := chromedp.Run(bctx, chromedp.Evaluate[string](overflow))
			require.NoError(t, err)
			require.Empty(t, out, "%s: wider than a %dpx phone screen", path, width)
		}
	}
	for _, name := range []string{"console-overview.png", "console-dead-letter.png", "console-source.png"} {
		fi, err := os.Stat(filepath.Join(shots, name))
		require.NoError(t, err)
		require.Greater(t, fi.Size(), int64(10_000), name)
	}
	t.Logf("screenshots in %s; pages: %s", shots, strconv.Quote(result[:min(len(result), 200)]))
}
