// Package xxljob is an executor for the XXL-JOB scheduler: it lets an
// XXL-JOB admin ("scheduling center") trigger Go handlers, read their logs,
// kill them, and receive their results. It uses only the standard library.
//
// # Compatibility
//
// Every admin generation from 2.3 to the branch after 3.4 (read at commit
// MainCommit) is served; Config.AdminVersion names one (Admin2x for 2.3 to
// 2.5, Admin33, Admin34, AdminMain) or, by default (AdminAuto), lets the
// executor learn it from the admin's answers and calls. The generations
// differ only at the edges: the envelope's payload field (content in 2.x,
// data in 3.x), the success message ("Success" from 3.3), where /kill puts
// "job thread already killed.", one refusal's spelling, and, after 3.4, /run
// renamed /trigger, an object-shaped callback, logDateTime instead of
// logDateTim, and a token per executor group named by the XXL-JOB-APPNAME
// header. Until auto knows, answers carry what every generation reads.
// Only BEAN mode is supported: GLUE triggers are refused with the text of
// the dialect (the branch after 3.4 says "fail, current glue type [..] not
// supported."), and so is a trigger without a glueType, as in Java; no code
// sent over the wire is ever run.
//
// # Routes and headers
//
// Served (admin → executor), all POST, all answered with HTTP 200 and a JSON
// envelope such as {"code":200} or {"code":500,"msg":"..."}:
//
//	/beat      liveness (FAILOVER routing); 500 once Shutdown started
//	/idleBeat  {"jobId"}: 500 while the job runs or has queued triggers (BUSYOVER), or once Shutdown started
//	/run       a trigger (also /trigger); queued at once, never waits for the handler
//	/kill      {"jobId"}: stop the job's running and queued triggers
//	/log       {"logId","logDateTim" or "logDateTime","fromLineNum"}: the run's log from that line to the end;
//	           "not ended" and empty for a run queued or starting here whose file is not written yet
//	           (its logId, and a trigger time on its day)
//
// Body members are matched by their exact names, as the Java executor's
// Gson does: "LogId" is not logId but an unknown member, ignored; a name
// repeated exactly keeps its last value.
//
// Called (executor → admin), on each admin base URL in order until one
// accepts: {admin}/api/registry, {admin}/api/registryRemove and
// {admin}/api/callback, with Content-Type application/json;charset=UTF-8 and
// the XXL-JOB-ACCESS-TOKEN and XXL-JOB-APPNAME headers. Requests to the
// executor must carry AccessToken in that header (compared in constant
// time); in the main dialect they must also name this AppName. New refuses
// an empty AccessToken unless OpenWithoutToken is set, which also binds the
// server to loopback unless ListenAddr says otherwise.
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
//     success, 500 failure, 502 timeout: the run's own deadline or a handler
//     returning ErrTimeout). Each result is written to the disk spool
//     ({LogPath}/callbackspool/) first, then sent in batches to
//     {admin}/api/callback from a memory queue of at most CallbackQueueSize;
//     what no admin accepts, or does not fit the queue, is delivered from disk
//     every CallbackRetryInterval, also after a crash or restart. Results a
//     Java 3.3+ executor left in {LogPath}/callbacklogs/ are delivered once.
//     A run's start is written to the spool (and synced) before its handler
//     is called, so a run the process never finished (killed or crashed
//     part-way) is reported by the next Start on the same LogPath: once,
//     500 "executor restarted during the run: it started at ...", and handed
//     to Config.InterruptedFunc for the application's own records.
//  4. Deregister: Shutdown fails beats, sends registryRemove, refuses new
//     triggers and kills the queued ones, waits up to ShutdownTimeout for
//     runs, cancels the rest, gives the callbacks one attempt and stops the
//     server. See Executor.Shutdown.
//
// A run (every outcome on the right is also a callback):
//
//	POST /run --refused--> code 500, no callback (unknown handler, GLUE,
//	    |                  DISCARD_LATER while busy, repeated logId, shutdown)
//	    | accepted: {"code":200}
//	    v
//	[queued] ---kill, COVER_EARLY, shutdown---> 500 "<reason> [job not executed, ...]"
//	    |
//	    | dequeued: start record synced to the spool, start line to the run log
//	    v
//	[running] --kill, COVER_EARLY, shutdown---> 500 "<reason> [job running, killed]"
//	    |     --executorTimeout---------------> 502 "job execute timeout "
//	    |     --process ends (kill -9, crash)--> 500 "executor restarted during the run: ..." at the next Start
//	    |
//	    | handler returned: nil 200, error 500, panic 500 with stack
//	    v
//	[finished] --callback--> admin, or the disk spool until an admin accepts it
//
// # Run logs
//
// Each run writes {LogPath}/{yyyy-MM-dd}/{logId}.log (the trigger's local
// date); the admin UI reads it through /log while the run is in progress and
// after. An answer streams the file from fromLineNum to the end (at most
// LogReadLimit bytes), since the admin UI reads a finished run's log in one
// pull. Handlers write to it with Request.Log or Request.Logf. The process
// log (Config.Logger) is separate. Folders older than LogRetentionDays are
// removed daily.
package xxljob
