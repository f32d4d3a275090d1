package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// Job params with SQL metacharacters, sent over the XXL-JOB port to the real
// orderTimeoutCloseJob: each run fails with a message saying what is wrong
// with the param, nothing is closed, every table is intact, and the
// executor keeps serving.
func TestOrderCloseHostileParams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := paytest.Setup(t)
	db := b.DB
	_, base := b.Seed(t, orderdemo.Spec{Orders: 200, SKUs: 20, DueFraction: 0.8, PaidFraction: 0.1, NotDueFraction: 0.1, CouponFraction: 0.3})
	before := b.Counts(t)

	admin := xxljobtest.New(t, xxljobtest.Options{Token: "tok"})
	exec, err := xxljob.New(xxljob.Config{AdminAddresses: []string{admin.URL}, AccessToken: "tok", AppName: "hostile-params",
		Address: "http://127.0.0.1:9999/", ListenAddr: "127.0.0.1:0", LogPath: t.TempDir(),
		CallbackRetryInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, Register(exec, &Deps{Closer: b.Closer}))
	require.NoError(t, exec.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, exec.Shutdown(sctx))
	})
	client := xxljobtest.NewClient("http://"+exec.Addr().String()+"/", "tok", xxljobtest.V24)
	t.Cleanup(client.Close)

	for i, tc := range []struct{ param, want string }{
		{"pageSize=1; DROP TABLE order_info; --", `job param pageSize="1; DROP TABLE order_info; --": want a whole number from 1 to 5000`},
		{"maxOrders=1 OR 1=1", `job param maxOrders="1 OR 1=1": want a whole number`},
		{"pageSize=10,maxOrders=5/*,dryRun=false*/", `job param maxOrders="5/*": want a whole number`},
		{"dryRun=true'--", `job param dryRun="true'--": want true or false`},
		{"maxPerSecond=1e3) UNION SELECT 1 --", `job param maxPerSecond="1e3) UNION SELECT 1 --": want a number`},
		{`{"pageSize":"1' OR '1'='1"}`, `job param pageSize="1' OR '1'='1": want a whole number`},
		{`{"pageSize":1,"x; DELETE FROM inventory":1}`, `unknown job param key(s) x; DELETE FROM inventory; allowed: pageSize, maxOrders, maxPerSecond, dryRun`},
		{"shard=0' OR id%2=1 --", `unknown job param key(s) shard; allowed:`},
		{`{"pageSize":{"$gt":0}}`, `job param key "pageSize": value must be a string, number or boolean`},
		{"pageSize=\x00", `job param pageSize="\x00": want a whole number`},
		{strings.Repeat("pageSize=1,", 500), `job param is 5500 bytes, the limit is 4096`},
		{"maxPerSecond=NaN", `job param maxPerSecond="NaN": want a number`},
		{"pageSize=-1", `job param pageSize="-1": want a whole number from 1 to 5000`},
		{"maxOrders=99999999999999999999", `job param maxOrders="99999999999999999999": want a whole number`},
		{`{"dryRun":true,"dryRun":false}`, `job param key "dryRun" given twice`},
		{`{"pageSize":50,"dryRun":"true","pageSize":50,"dryRun":false}`, `job param key "pageSize" given twice`},
	} {
		p := xxljobtest.Trigger(1, OrderTimeoutCloseJob, int64(5000+i))
		p.ExecutorParams = tc.param
		env, err := client.Run(ctx, p)
		require.NoError(t, err)
		require.Equal(t, 200, env.Code, "the trigger is accepted; the run fails: %s", env.MsgString())
		cb, err := admin.WaitCallback(p.LogID, 10*time.Second)
		require.NoError(t, err)
		name := tc.param[:min(len(tc.param), 60)]
		require.Equal(t, 500, cb.HandleCode, name)
		require.Contains(t, cb.HandleMsg, tc.want, name)
		_, lr, err := client.Log(ctx, p.LogDateTime, p.LogID, 1)
		require.NoError(t, err)
		require.Contains(t, lr.LogContent, tc.want, "the run log says why")
	}
	after, err := ordertest.Counts(ctx, db.DB)
	require.NoError(t, err)
	require.Equal(t, before, after, "a run with a bad param changed orders")
	require.NoError(t, ordertest.Check(ctx, db.DB, base))
	for _, table := range []string{"order_info", "order_item", "inventory", "user_coupon", "order_close_log", "order_dead_letter"} {
		var n int
		require.NoError(t, db.Get(&n, "SELECT COUNT(*) FROM "+table), table)
	}
	// And a good param still works.
	p := xxljobtest.Trigger(1, OrderTimeoutCloseJob, 6000)
	p.ExecutorParams = "pageSize=50"
	env, err := client.Run(ctx, p)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	cb, err := admin.WaitCallback(p.LogID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
	require.NoError(t, ordertest.Check(ctx, db.DB, base))
}
