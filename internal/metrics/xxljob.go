package metrics

import (
	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobprom"
)

// Metric names of the XXL-JOB side, recorded by xxljobprom (the metrics
// package other teams use with xxljob too).
const (
	XXLRunsTotal               = "xxljob_runs_total"
	XXLRunsInProgress          = "xxljob_runs_in_progress"
	XXLRunDurationSeconds      = "xxljob_run_duration_seconds"
	XXLCallbackBatchesTotal    = "xxljob_callback_batches_total"
	XXLCallbackResultsTotal    = "xxljob_callback_results_total"
	XXLCallbackQueueLength     = "xxljob_callback_queue_length"
	XXLCallbackSpoolResults    = "xxljob_callback_spool_results"
	XXLRegistryHeartbeatsTotal = "xxljob_registry_heartbeats_total"
	XXLRegistryLastSuccess     = "xxljob_registry_last_success_timestamp_seconds"
)

type xxlMetrics struct{ obs *xxljobprom.Observer }

func newXXLMetrics(m *Metrics) xxlMetrics {
	for name, k := range map[string]kind{
		XXLRunsTotal: kindCounter, XXLRunsInProgress: kindGauge, XXLRunDurationSeconds: kindHistogram,
		XXLCallbackBatchesTotal: kindCounter, XXLCallbackResultsTotal: kindCounter, XXLCallbackQueueLength: kindGauge,
		XXLCallbackSpoolResults: kindGauge, XXLRegistryHeartbeatsTotal: kindCounter, XXLRegistryLastSuccess: kindGauge,
	} {
		m.define(name, k)
	}
	obs := xxljobprom.New(xxljobprom.Options{})
	m.reg.MustRegister(obs)
	return xxlMetrics{obs: obs}
}

// XXLJob returns the observer for xxljob.Config.Observer.
func (m *Metrics) XXLJob() xxljob.Observer { return m.xxl.obs }

// WatchExecutor exports the executor's in-memory callback queue length and
// the time of its last accepted registration: a process whose XXL-JOB side
// is off exports neither, rather than a 0 that alerts would read as "never
// registered".
func (m *Metrics) WatchExecutor(e *xxljob.Executor) { m.xxl.obs.Watch(e) }
