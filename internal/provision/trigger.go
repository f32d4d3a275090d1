package provision

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TriggerOptions are the arguments of `executor trigger`.
type TriggerOptions struct {
	Handler string
	Key     string  // picks one job when several declare Handler; optional
	Param   *string // nil: the job's own param (as the console's run-once dialog pre-fills it)
	Wait    bool    // follow the run's log until it ends
	Out     io.Writer
	// PollInterval is the pause between reads while waiting. Default 1s.
	PollInterval time.Duration
}

// RunResult is the outcome of a triggered run that was waited for.
type RunResult struct {
	JobID   int
	LogIDs  []int64 // one per executor for a broadcast run
	Success bool
	Message string // the failing row's message, when not Success
}

// Trigger finds the declared job by handler (and key) in the admin, asks the
// admin to run it once, and with Wait follows the run's log through the
// admin until it ends. A run that ends in failure is not an error: look at
// RunResult.Success.
func Trigger(ctx context.Context, c *Client, f *JobsFile, opts TriggerOptions) (RunResult, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	spec, err := f.pick(opts.Handler, opts.Key)
	if err != nil {
		return RunResult{}, err
	}
	if c.api == nil {
		if err := c.Login(ctx); err != nil {
			return RunResult{}, err
		}
	}
	job, err := findJob(ctx, c, f, spec)
	if err != nil {
		return RunResult{}, err
	}
	param := job.ExecutorParam
	if opts.Param != nil {
		param = *opts.Param
	}

	// The trigger answer carries no log id: note the newest run first, then
	// look for rows above it (ids only grow; no clock comparison).
	var baseline int64
	if opts.Wait {
		rows, err := c.recentLogs(ctx, job.JobGroup, job.ID, 10)
		if err != nil {
			return RunResult{}, err
		}
		for _, r := range rows {
			baseline = max(baseline, r.ID)
		}
	}
	if err := c.triggerJob(ctx, job.ID, param); err != nil {
		return RunResult{}, fmt.Errorf("trigger job %s (%s, id %d): %w", spec.Key, spec.Handler, job.ID, err)
	}
	fmt.Fprintf(out, "triggered job %s (%s, id %d) with param %q\n", spec.Key, spec.Handler, job.ID, param)
	res := RunResult{JobID: job.ID}
	if !opts.Wait {
		return res, nil
	}
	w := &waiter{c: c, out: out, every: cmp.Or(opts.PollInterval, time.Second), group: job.JobGroup, job: job.ID}
	return w.follow(ctx, baseline, res)
}

// pick returns the one declared job for handler (and key).
func (f *JobsFile) pick(handler, key string) (*JobSpec, error) {
	var cands []*JobSpec
	var handlers []string
	for i := range f.Jobs {
		j := &f.Jobs[i]
		if !slices.Contains(handlers, j.Handler) {
			handlers = append(handlers, j.Handler)
		}
		if j.Handler == handler && (key == "" || j.Key == key) {
			cands = append(cands, j)
		}
	}
	switch len(cands) {
	case 1:
		return cands[0], nil
	case 0:
		if key != "" {
			return nil, fmt.Errorf("provision: %s declares no job with handler %q and key %q", f.Path, handler, key)
		}
		return nil, fmt.Errorf("provision: handler %q is not declared in %s (declared: %s): declare a job for it there and run executor provision",
			handler, f.Path, strings.Join(handlers, ", "))
	}
	keys := make([]string, len(cands))
	for i, j := range cands {
		keys[i] = j.Key
	}
	return nil, fmt.Errorf("provision: handler %q is declared by %d jobs in %s (keys: %s): choose one with -key",
		handler, len(cands), f.Path, strings.Join(keys, ", "))
}

// findJob finds the admin's job for spec: group by appname, then handler and
// marker, exactly one.
func findJob(ctx context.Context, c *Client, f *JobsFile, spec *JobSpec) (Job, error) {
	groups, err := c.findGroups(ctx, f.Group.AppName)
	if err != nil {
		return Job{}, err
	}
	if len(groups) != 1 {
		return Job{}, fmt.Errorf("provision: the admin has %d executor groups with appname %q, want 1 (run executor provision)",
			len(groups), f.Group.AppName)
	}
	jobs, err := c.listJobs(ctx, groups[0].ID, spec.Handler)
	if err != nil {
		return Job{}, err
	}
	var found []Job
	for _, j := range jobs {
		if strings.TrimSpace(j.ExecutorHandler) == spec.Handler && markerKey(j.JobDesc) == spec.Key {
			found = append(found, j)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Job{}, fmt.Errorf("provision: no job in the admin's group %s has handler %q and marker %s (run executor provision first)",
			f.Group.AppName, spec.Handler, spec.Marker())
	}
	var ids []string
	for _, j := range found {
		ids = append(ids, fmt.Sprintf("%d %q", j.ID, j.JobDesc))
	}
	return Job{}, fmt.Errorf("provision: %d jobs in the admin have handler %q and marker %s: %s; remove the extra ones in the console",
		len(found), spec.Handler, spec.Marker(), strings.Join(ids, ", "))
}

// waiter follows a triggered run through the admin.
type waiter struct {
	c     *Client
	out   io.Writer
	every time.Duration
	group int
	job   int
}

// follow waits for the run's rows (ids above baseline; a broadcast run has
// one per executor, "i/n" in executorShardingParam), prints each row's log
// and returns the result once every row has ended.
func (w *waiter) follow(ctx context.Context, baseline int64, res RunResult) (RunResult, error) {
	rows, err := w.runRows(ctx, baseline)
	if err != nil {
		return res, err
	}
	res.Success = true
	for _, r := range rows {
		res.LogIDs = append(res.LogIDs, r.ID)
		end, err := w.followRow(ctx, r)
		if err != nil {
			return res, err
		}
		shard := ""
		if end.ExecutorShardingParam != "" {
			shard = " shard " + end.ExecutorShardingParam
		}
		if ok, msg := outcome(end); ok {
			fmt.Fprintf(w.out, "run %d%s on %s: success\n", end.ID, shard, cmp.Or(end.ExecutorAddress, "-"))
		} else {
			fmt.Fprintf(w.out, "run %d%s on %s: failed: %s\n", end.ID, shard, cmp.Or(end.ExecutorAddress, "-"), msg)
			if res.Success {
				res.Success, res.Message = false, msg
			}
		}
	}
	return res, nil
}

// runRows waits until the rows of the run are all listed: the first row
// above baseline, plus for a broadcast run its n-1 siblings.
func (w *waiter) runRows(ctx context.Context, baseline int64) ([]LogRow, error) {
	for {
		rows, err := w.c.recentLogs(ctx, w.group, w.job, 50)
		if err != nil {
			return nil, err
		}
		var fresh []LogRow
		for _, r := range rows {
			if r.ID > baseline {
				fresh = append(fresh, r)
			}
		}
		slices.SortFunc(fresh, func(a, b LogRow) int { return cmp.Compare(a.ID, b.ID) })
		if len(fresh) > 0 {
			total := shardTotal(fresh[0].ExecutorShardingParam)
			var run []LogRow
			seen := map[string]bool{}
			for _, r := range fresh {
				if shardTotal(r.ExecutorShardingParam) == total && !seen[r.ExecutorShardingParam] {
					seen[r.ExecutorShardingParam] = true
					run = append(run, r)
				}
				if len(run) == total {
					return run, nil
				}
			}
		}
		if err := w.pause(ctx); err != nil {
			return nil, err
		}
	}
}

// followRow prints the row's log until the admin says it ended, then waits
// for the row's result. If the log cannot be read (executor gone), it only
// waits for the result.
func (w *waiter) followRow(ctx context.Context, r LogRow) (LogRow, error) {
	for r.TriggerCode == 0 { // not sent to the executor yet
		if err := w.pause(ctx); err != nil {
			return r, err
		}
		if err := w.reload(ctx, &r); err != nil {
			return r, err
		}
	}
	for from := 1; r.TriggerCode == 200; {
		ch, err := w.c.logCat(ctx, r.ID, from)
		var re *RefusedError
		if errors.As(err, &re) {
			fmt.Fprintf(w.out, "run %d: log not readable through the admin: %s\n", r.ID, re.Msg)
			break
		}
		if err != nil {
			return r, err
		}
		if ch.LogContent != "" {
			io.WriteString(w.out, logText(ch.LogContent))
		}
		if ch.ToLineNum >= from {
			from = ch.ToLineNum + 1
		}
		if ch.End {
			break
		}
		if ch.ToLineNum < ch.FromLineNum { // nothing new yet
			if err := w.pause(ctx); err != nil {
				return r, err
			}
		}
	}
	for !ended(r) { // the log has ended; the row may lag behind by a moment
		if err := w.reload(ctx, &r); err != nil {
			return r, err
		}
		if ended(r) {
			break
		}
		if err := w.pause(ctx); err != nil {
			return r, err
		}
	}
	return r, nil
}

// reload reads row r again.
func (w *waiter) reload(ctx context.Context, r *LogRow) error {
	rows, err := w.c.recentLogs(ctx, w.group, w.job, 50)
	if err != nil {
		return err
	}
	for _, x := range rows {
		if x.ID == r.ID {
			*r = x
			return nil
		}
	}
	return fmt.Errorf("provision: run %d is no longer among the newest runs of job %d", r.ID, w.job)
}

func (w *waiter) pause(ctx context.Context) error {
	t := time.NewTimer(w.every)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("provision: waiting for the run: %w", context.Cause(ctx))
	case <-t.C:
		return nil
	}
}

// ended: the trigger failed (no run happened), or the executor reported.
func ended(r LogRow) bool { return r.TriggerCode == 500 || r.HandleCode != 0 }

func outcome(r LogRow) (bool, string) {
	if r.TriggerCode == 500 {
		return false, "trigger failed: " + plain(r.TriggerMsg)
	}
	if r.HandleCode == 200 {
		return true, ""
	}
	return false, fmt.Sprintf("code %d: %s", r.HandleCode, plain(r.HandleMsg))
}

// shardTotal reads n from "i/n"; 1 for a run that is not broadcast.
func shardTotal(s string) int {
	_, n, ok := strings.Cut(s, "/")
	if t, err := strconv.Atoi(n); ok && err == nil && t > 0 {
		return t
	}
	return 1
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

// plain turns the admin's HTML messages into one line of text.
func plain(s string) string {
	s = strings.NewReplacer("<br>", "; ", "<br/>", "; ", "<br />", "; ").Replace(s)
	s = html.UnescapeString(tagRE.ReplaceAllString(s, ""))
	return strings.Trim(strings.Join(strings.Fields(s), " "), "; ")
}

// logText undoes the admin's HTML escaping of run logs (2.4.1+).
func logText(s string) string {
	s = strings.NewReplacer("<br>", "\n", "<b>", "", "</b>", "").Replace(s)
	s = html.UnescapeString(s)
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}
