package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/xxljob"
)

// An orderTimeoutCloseJob run the previous process never finished gets a
// failed close-run record with its parameters, shard and the executor's
// message; another handler's run gets none.
func TestRecordInterrupted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newOrderWorld(t, b, b.db.DB)
	record := RecordInterrupted(w.closer)
	ctx := context.Background()
	started := b.db.Now(t).Add(-time.Second)
	for _, run := range []xxljob.InterruptedRun{
		{Handler: OrderTimeoutCloseJob, LogID: 7001, Param: "dryRun=true,pageSize=50", ShardIndex: 2, ShardTotal: 3,
			StartedAt: started, Msg: "executor restarted during the run: it started at ..."},
		{Handler: OrderTimeoutCloseJob, LogID: 7001, StartedAt: started, Msg: "again, from a later restart"},
		{Handler: DelayTaskSweepJob, LogID: 7002, StartedAt: started, Msg: "not a close run"},
	} {
		require.NoError(t, record(ctx, run))
	}
	runs, err := inspect.NewCloseRuns(b.db.DB).Recent(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	r := runs[0]
	require.Equal(t, int64(7001), r.LogID)
	require.Equal(t, "xxl-job log 7001", r.Source)
	require.True(t, r.DryRun)
	require.Equal(t, 2, r.ShardIndex)
	require.Equal(t, 3, r.ShardTotal)
	require.Equal(t, "executor restarted during the run: it started at ...", r.Error)
	require.True(t, r.Failed())
}
