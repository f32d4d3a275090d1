// Package xxljob is an executor for the XXL-JOB scheduler: it lets an
// XXL-JOB admin ("scheduling center") trigger Go handlers, read their logs,
// kill them, and receive their results. It uses only the standard library.
//
// # Compatibility
//
// The wire format is that of xxl-job-admin 2.4.x (identical on the wire to
// 2.3.0 to 2.5.0). It also works with 3.3.x and 3.4.x admins: the executor
// always sends the XXL-JOB-ACCESS-TOKEN header, accepts an empty /beat body,
// and puts the /log result under both "content" and "data". 3.5 (/run renamed
// /trigger) is not a target. Only BEAN mode is supported: GLUE triggers are
// refused, no code sent over the wire is ever run.
//
// # Routes and headers
//
// Served (admin → executor), all POST, all answered with HTTP 200 and a JSON
// envelope such as {"code":200} or {"code":500,"msg":"..."}:
//
//	/beat      liveness (FAILOVER routing)
//	/idleBeat  {"jobId"}: 500 while the job runs or has queued triggers (BUSYOVER)
//	/run       a trigger; queued at once, never waits for the handler
//	/kill      {"jobId"}: stop the job's running and queued triggers
//	/log       {"logDateTim","logId","fromLineNum"}: page a run's log
//
// Called (executor → admin), on each admin base URL in order until one
// accepts: {admin}/api/registry, {admin}/api/registryRemove and
// {admin}/api/callback, with Content-Type application/json;charset=UTF-8 and
// the XXL-JOB-ACCESS-TOKEN header. When AccessToken is set, requests to the
// executor must carry it in that header (compared in constant time).
//
// # Lifecycle
//
//  1. Register: Start binds the server and registers AppName and Address,
//     then repeats every RegistryInterval (the admin drops executors silent
//     for 90 s).
//  2. Trigger: the admin POSTs /run. Each jobId has its own goroutine with a
//     FIFO queue; the job's block strategy (SERIAL_EXECUTION, DISCARD_LATER,
//     COVER_EARLY) decides what happens to a trigger arriving while the job is
//     busy. Different jobs run in parallel. The handler gets a context from
//     the executor (never from the HTTP request), with the job's
//     executorTimeout, and a Request with its parameters and run log.
//  3. Callback: every accepted trigger yields exactly one result (200
//     success, 500 failure, 502 timeout), sent in batches to
//     {admin}/api/callback. Results no admin accepts are spooled to
//     {LogPath}/callbacklog/ and retried every CallbackRetryInterval, also
//     after a restart.
//  4. Deregister: Shutdown sends registryRemove, refuses new triggers, waits
//     up to ShutdownTimeout for runs, cancels the rest, flushes the
//     callbacks and stops the server. See Executor.Shutdown.
//
// A run (every outcome on the right is also a callback):
//
//	POST /run --refused--> code 500, no callback (unknown handler, GLUE,
//	    |                  DISCARD_LATER while busy, repeated logId, shutdown)
//	    | accepted: {"code":200}
//	    v
//	[queued] ---kill, COVER_EARLY, shutdown---> 500 "<reason> [job not executed, ...]"
//	    |
//	    | dequeued: start line written to the run log
//	    v
//	[running] --kill, COVER_EARLY, shutdown---> 500 "<reason> [job running, killed]"
//	    |     --executorTimeout---------------> 502 "job execute timeout "
//	    |
//	    | handler returned: nil 200, error 500, panic 500 with stack
//	    v
//	[finished] --callback--> admin, or the disk spool until an admin accepts it
//
// # Run logs
//
// Each run writes {LogPath}/{yyyy-MM-dd}/{logId}.log (the trigger's local
// date); the admin UI reads it through /log while the run is in progress and
// after. Handlers write to it with Request.Log or Request.Logf. The process
// log (Config.Logger) is separate. Folders older than LogRetentionDays are
// removed daily.
package xxljob
