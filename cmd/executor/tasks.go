package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

func tasksCommand() *command {
	return &command{name: "tasks", summary: "inspect and operate delayed tasks (job_delay_task); -json for machines",
		sub: []*command{
			{name: "stats", summary: "counts by status, backlog, stuck tasks, timer size", flags: tasksVerb(tasksStats)},
			{name: "list", summary: "list tasks, newest first", flags: tasksList},
			{name: "show", args: "BIZUUID", summary: "show one task", flags: tasksVerb(tasksShow)},
			{name: "requeue", args: "BIZUUID", summary: "make a failed or cancelled task pending again, due now", flags: tasksVerb(tasksRequeue)},
			{name: "cancel", args: "BIZUUID", summary: "cancel a pending task", flags: tasksVerb(tasksCancel)},
			{name: "check", summary: "exit 1 when a bizUuid is duplicated or a task is stuck", flags: tasksVerb(tasksCheck)},
			{name: "purge", summary: "delete done and cancelled tasks older than delay.retention", flags: tasksPurge},
		}}
}

// tasksCtx is what every tasks subcommand gets.
type tasksCtx struct {
	env       *cliEnv
	client    *delay.Client
	retention time.Duration
	jsonOut   bool
	source    string // -source: the order source whose tasks; "" mysql.dsn's
}

// newTasksCtx makes a verb's context and adds -json and -source to its
// flags.
func newTasksCtx(fs *flag.FlagSet, env *cliEnv) *tasksCtx {
	tc := &tasksCtx{env: env}
	addJSON(fs, &tc.jsonOut)
	addSourceFlag(fs, &tc.source)
	return tc
}

// tasksVerb is the flags function of a verb with no flags but -json.
func tasksVerb(run func(ctx context.Context, tc *tasksCtx, pos []string) error) func(*flag.FlagSet, *cliEnv) runFunc {
	return func(fs *flag.FlagSet, env *cliEnv) runFunc {
		tc := newTasksCtx(fs, env)
		return func(ctx context.Context, pos []string) error { return run(ctx, tc, pos) }
	}
}

// open loads the config and builds a Client on the database of -source
// and its timer (which it only tells of requeued tasks; without it the
// dispatchers' reconciler does): each order database keeps its own tasks,
// timed under names of its own (app.DelayKeysOf).
func (tc *tasksCtx) open(ctx context.Context) (func(), error) {
	cfg, src, db, err := loadSourceDB(ctx, tc.env, tc.source)
	if err != nil {
		return nil, err
	}
	keys := app.DelayKeysOf(cfg, src)
	rdb, err := app.NewRedis(cfg.Redis)
	if err != nil {
		db.Close()
		return nil, err
	}
	// A redis.db the server lacks would make every timer call below fail
	// with a bare "ERR DB index is out of range"; say what to change.
	if err := app.CheckRedisDB(ctx, cfg.Redis, rdb); err != nil {
		db.Close()
		rdb.Close()
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(tc.env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	useLibLogger(log)
	rt, err := app.StartRabbitMQTimer(ctx, cfg, db, keys.RabbitMQPrefix, log)
	if err != nil {
		db.Close()
		rdb.Close()
		return nil, err
	}
	closeAll := func() {
		if rt != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = rt.Stop(sctx)
			cancel()
		}
		db.Close()
		rdb.Close()
	}
	tc.client, err = delay.NewClient(db, rdb, delay.ClientConfig{Timer: app.TimerOf(rt), KeyPrefix: keys.KeyPrefix,
		TimerShards: cfg.Delay.TimerShards, RunningTimeout: cfg.Delay.RunningTimeout, Logger: log})
	if err != nil {
		closeAll()
		return nil, err
	}
	tc.retention = cfg.Delay.Retention
	return closeAll, nil
}

func (tc *tasksCtx) printJSON(v any) error { return printJSON(tc.env.stdout, v) }

func (tc *tasksCtx) output() (io.Writer, bool) { return tc.env.stdout, tc.jsonOut }

func tasksStats(ctx context.Context, tc *tasksCtx, _ []string) error {
	return runView(ctx, tc, func(ctx context.Context) (*delay.Stats, error) { return tc.client.Stats(ctx) }, printTaskStats)
}

// printTaskStats writes the counts of tasks-stats as a table.
func printTaskStats(out io.Writer, s *delay.Stats) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STATUS\tTASKS")
	for _, st := range delay.Statuses {
		fmt.Fprintf(w, "%s\t%d\n", statusText(st), s.Counts[st])
	}
	fmt.Fprintf(w, "total\t%d\n", s.Total)
	fmt.Fprintln(w, "\t")
	due := fmt.Sprint(s.DueNow)
	if s.OldestDue != nil {
		due += fmt.Sprintf(" (oldest due %s, %s ago)", s.OldestDue.Format(time.RFC3339Nano), time.Duration(s.OldestDueAge).Round(time.Millisecond))
	}
	fmt.Fprintf(w, "due now (backlog)\t%s\n", due)
	fmt.Fprintf(w, "stuck running > %s\t%d\n", s.RunningTimeout, s.StuckRunning)
	what := map[string]string{"redis": "Redis timer entries", "rabbitmq": "RabbitMQ timer messages"}[s.Timer]
	switch {
	case what == "":
	case s.TimerSize != nil:
		fmt.Fprintf(w, "%s\t%d\n", what, *s.TimerSize)
	default:
		fmt.Fprintf(w, "%s\tunknown (%s unreachable)\n", what, strings.SplitN(what, " ", 2)[0])
	}
	fmt.Fprintf(w, "database time (UTC)\t%s\n", s.DBTime.Format(time.RFC3339Nano))
	return w.Flush()
}

func tasksList(fs *flag.FlagSet, env *cliEnv) runFunc {
	tc := newTasksCtx(fs, env)
	lf := addListFlags(fs, "tasks", "pending, running, done, failed or cancelled")
	handler := fs.String("handler", "", "only this handler")
	return func(ctx context.Context, _ []string) error {
		if err := lf.check(); err != nil {
			return err
		}
		return listTasks(ctx, tc, delay.ListFilter{Status: delay.Status(*lf.status), Handler: *handler, Limit: *lf.limit, BeforeID: *lf.before})
	}
}

func listTasks(ctx context.Context, tc *tasksCtx, f delay.ListFilter) error {
	st := delay.Status(strings.ToUpper(string(f.Status)))
	if st != "" && !st.Valid() {
		return usagef("-status %q is not pending, running, done, failed or cancelled", f.Status)
	}
	f.Status = st
	return runView(ctx, tc, func(ctx context.Context) ([]*delay.Task, error) { return tc.client.List(ctx, f) },
		func(w io.Writer, tasks []*delay.Task) error {
			rows := make([]string, len(tasks))
			for i, t := range tasks {
				rows[i] = fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%d/%d\t%s", t.ID, t.BizUUID, t.Handler, statusText(t.Status),
					t.NextAttemptTime.Format("2006-01-02 15:04:05.000"), t.RetryCount, t.MaxRetry, oneLine(t.LastError, 80))
			}
			var next int64
			if len(tasks) == f.Limit {
				next = tasks[len(tasks)-1].ID
			}
			return printListing(w, "tasks", "ID\tBIZ_UUID\tHANDLER\tSTATUS\tNEXT_ATTEMPT (UTC)\tRETRIES\tLAST_ERROR", rows, next)
		})
}

// statusText is a task's status as the CLI writes every status: in lower
// case (the database, the API and -json keep delay's upper case).
func statusText(s delay.Status) string { return strings.ToLower(string(s)) }

// oneLine keeps the first line of s, cut to n characters.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func printTask(w io.Writer, t *delay.Task) error {
	ts := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	return printFields(w, [][2]string{
		{"id", fmt.Sprint(t.ID)}, {"bizUuid", t.BizUUID}, {"traceId", t.TraceID}, {"handler", t.Handler},
		{"status", statusText(t.Status)}, {"executeTime", ts(t.ExecuteTime)}, {"nextAttemptTime", ts(t.NextAttemptTime)},
		{"retries", fmt.Sprintf("%d of %d", t.RetryCount, t.MaxRetry)}, {"createdAt", ts(t.CreatedAt)},
		{"updatedAt", ts(t.UpdatedAt)}, {"payload", string(t.Payload)}, {"lastError", oneLine(t.LastError, 1000)},
	})
}

// oneTask runs an operation on one task and prints the task.
func oneTask(ctx context.Context, tc *tasksCtx, pos []string, op func(context.Context, string) (*delay.Task, error)) error {
	// A conflict still shows the task.
	return runOne(ctx, tc, func(ctx context.Context) (*delay.Task, error) {
		if err := checkBizUUID(pos[0]); err != nil {
			return nil, err
		}
		return op(ctx, pos[0])
	}, delay.ErrNotFound, fmt.Errorf("no task with bizUuid %q", pos[0]), printTask)
}

// checkBizUUID refuses, as bad usage, a BIZUUID no task can have: empty,
// longer than the column (a 100 KB one was echoed whole in "no task"), or
// not printable ASCII. It runs once the database is open, so a command
// that cannot open it says that first.
func checkBizUUID(s string) error {
	switch {
	case s == "":
		return oplist.Invalid("bizUuid", "BIZUUID is empty")
	case len(s) > delay.MaxBizUUIDLen:
		return oplist.Invalid("bizUuid", "BIZUUID is %d bytes, at most %d", len(s), delay.MaxBizUUIDLen)
	case !sqlexec.PrintableASCII(s):
		return oplist.Invalid("bizUuid", "BIZUUID %q is not printable ASCII", s)
	}
	return nil
}

func tasksShow(ctx context.Context, tc *tasksCtx, pos []string) error {
	return oneTask(ctx, tc, pos, func(ctx context.Context, biz string) (*delay.Task, error) {
		return tc.client.Get(ctx, biz)
	})
}

func tasksRequeue(ctx context.Context, tc *tasksCtx, pos []string) error {
	return oneTask(ctx, tc, pos, func(ctx context.Context, biz string) (*delay.Task, error) {
		return tc.client.Requeue(ctx, biz)
	})
}

func tasksCancel(ctx context.Context, tc *tasksCtx, pos []string) error {
	return oneTask(ctx, tc, pos, func(ctx context.Context, biz string) (*delay.Task, error) {
		return tc.client.Cancel(ctx, biz)
	})
}

func tasksCheck(ctx context.Context, tc *tasksCtx, _ []string) error {
	var rep *delay.CheckReport
	err := runView(ctx, tc, func(ctx context.Context) (*delay.CheckReport, error) {
		var err error
		rep, err = tc.client.Check(ctx)
		return rep, err
	}, printCheck)
	if err != nil {
		return err
	}
	if !rep.OK {
		return exitError{code: 1}
	}
	return nil
}

// printCheck writes what tasks-check found, a line each.
func printCheck(out io.Writer, rep *delay.CheckReport) error {
	for _, d := range rep.DuplicateBizUUIDs {
		fmt.Fprintf(out, "DUPLICATE bizUuid %q held by %d tasks\n", d.Value, d.N)
	}
	for _, d := range rep.DuplicateTraceIDs {
		fmt.Fprintf(out, "DUPLICATE trace id %q held by %d tasks\n", d.Value, d.N)
	}
	fmt.Fprintf(out, "duplicated bizUuids: %d\n", len(rep.DuplicateBizUUIDs))
	fmt.Fprintf(out, "stuck running: %d\n", rep.StuckRunning)
	fmt.Fprintf(out, "failed (see tasks list -status failed): %d\n", rep.Failed)
	fmt.Fprintf(out, "due now: %d (oldest %s late)\n", rep.DueNow, time.Duration(rep.OldestDueAge).Round(time.Millisecond))
	if rep.OK {
		fmt.Fprintln(out, "ok")
	} else {
		fmt.Fprintf(out, "PROBLEMS: %s\n", strings.Join(rep.Problems, "; "))
	}
	return nil
}

func tasksPurge(fs *flag.FlagSet, env *cliEnv) runFunc {
	tc := newTasksCtx(fs, env)
	retention := fs.Duration("retention", 0, "keep tasks changed within this (default: delay.retention)")
	return func(ctx context.Context, _ []string) error {
		if *retention < 0 { // was taken as the default, silently
			return usagef("-retention %s is negative", *retention)
		}
		return purgeTasks(ctx, tc, *retention)
	}
}

func purgeTasks(ctx context.Context, tc *tasksCtx, retention time.Duration) error {
	closeAll, err := tc.open(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	keep := tc.retention
	if retention > 0 {
		keep = retention
	}
	n, err := tc.client.Purge(ctx, keep)
	if err != nil {
		return err
	}
	if tc.jsonOut {
		return tc.printJSON(map[string]any{"deleted": n, "retention": keep.String()})
	}
	fmt.Fprintf(tc.env.stdout, "deleted %d done/cancelled tasks older than %s\n", n, keep)
	return nil
}
