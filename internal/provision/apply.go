package provision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ApplyOptions are the flags of `executor provision`.
type ApplyOptions struct {
	DryRun bool      // print the plan, change nothing
	Prune  bool      // stop (never delete) marked jobs no longer declared
	Out    io.Writer // the plan and the summary; default: discard
}

// Apply makes the admin hold the group and jobs of f: it logs in, reads the
// group and its jobs, prints the plan, and unless DryRun carries it out in
// an order that keeps every job safe (children before parents, a new job
// saved stopped and started by its own call, a stop before a save), then
// reads everything back to verify. It returns the plan it carried out.
func Apply(ctx context.Context, c *Client, f *JobsFile, opts ApplyOptions) (*Plan, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	if c.api == nil {
		if err := c.Login(ctx); err != nil {
			return nil, err
		}
	}
	plan, err := readPlan(ctx, c, f, opts.Prune)
	if err != nil {
		return nil, err
	}
	if err := checkSchedules(ctx, c, plan); err != nil {
		return nil, err
	}
	plan.Print(out)
	n := plan.Counts()
	if opts.DryRun {
		fmt.Fprintf(out, "dry run, nothing changed: would create %d, update %d, start %d, stop %d; %d unchanged\n",
			n.Created, n.Updated, n.Started, n.Stopped, n.Unchanged)
		return plan, nil
	}
	if !plan.Writes() {
		fmt.Fprintf(out, "nothing to do: %d jobs unchanged\n", n.Unchanged)
		return plan, nil
	}
	if err := execute(ctx, c, f, plan); err != nil {
		return nil, err
	}
	if err := verify(ctx, c, f, plan); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "done: %d created, %d updated, %d started, %d stopped, %d unchanged\n",
		n.Created, n.Updated, n.Started, n.Stopped, n.Unchanged)
	return plan, nil
}

// readPlan finds the group by its exact appname and compares its jobs with f.
func readPlan(ctx context.Context, c *Client, f *JobsFile, prune bool) (*Plan, error) {
	groups, err := c.findGroups(ctx, f.Group.AppName)
	if err != nil {
		return nil, err
	}
	var group *Group
	var jobs []Job
	switch len(groups) {
	case 0:
	case 1:
		group = &groups[0]
		if jobs, err = c.listJobs(ctx, group.ID, ""); err != nil {
			return nil, err
		}
	default:
		var ids []string
		for _, g := range groups {
			ids = append(ids, strconv.Itoa(g.ID))
		}
		return nil, fmt.Errorf("provision: %d executor groups have appname %q (ids %s): remove the extra ones in the console",
			len(groups), f.Group.AppName, strings.Join(ids, ", "))
	}
	token := ""
	if c.api.groupToken {
		if token = c.cfg.GroupToken; token == "" {
			return nil, errors.New("provision: the admin (the branch after 3.4) lets executors register only with their group's " +
				"access token: set xxl.job.accessToken, and provision creates the group with it")
		}
	}
	return buildPlan(f, group, jobs, prune, token)
}

// checkSchedules asks the admin to judge every schedule about to be saved,
// before the first write, so a bad cron stops the run with nothing changed.
func checkSchedules(ctx context.Context, c *Client, p *Plan) error {
	var refused []error
	for _, j := range p.Jobs {
		if j.Op == OpUnchanged || j.Spec.ScheduleType == "NONE" {
			continue
		}
		err := c.checkSchedule(ctx, j.Spec.ScheduleType, j.Spec.ScheduleConf)
		var re *RefusedError
		switch {
		case errors.As(err, &re):
			refused = append(refused, fmt.Errorf("job %s: schedule %s %q: %w", j.Spec.Key, j.Spec.ScheduleType, j.Spec.ScheduleConf, err))
		case err != nil:
			return err
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("provision: nothing changed: %w", errors.Join(refused...))
	}
	return nil
}

// execute carries the plan out. Each write is logged as it is made, so a
// failure half-way leaves a record of what was done.
func execute(ctx context.Context, c *Client, f *JobsFile, p *Plan) error {
	g := &p.Group
	switch g.Op {
	case OpCreate:
		if err := c.createGroup(ctx, g.Want); err != nil {
			return fmt.Errorf("create group %s: %w", g.Want.AppName, err)
		}
		// The admin returns no id and accepts duplicates: find exactly one.
		groups, err := c.findGroups(ctx, g.Want.AppName)
		if err != nil {
			return err
		}
		if len(groups) != 1 {
			return fmt.Errorf("provision: after creating group %s the admin lists %d groups with that appname", g.Want.AppName, len(groups))
		}
		g.ID = groups[0].ID
		c.log.InfoContext(ctx, "created executor group", "appname", g.Want.AppName, "group_id", g.ID)
	case OpUpdate:
		if err := c.updateGroup(ctx, g.Want); err != nil {
			return fmt.Errorf("update group %s (id %d): %w", g.Want.AppName, g.ID, err)
		}
		c.log.InfoContext(ctx, "updated executor group", "appname", g.Want.AppName, "group_id", g.ID)
	}

	ids := map[string]int{}
	for _, j := range p.Jobs {
		if j.ID != 0 {
			ids[j.Spec.Key] = j.ID
		}
	}
	order, err := f.saveOrder()
	if err != nil {
		return err
	}
	for _, i := range order {
		j := &p.Jobs[i]
		name := fmt.Sprintf("job %s (%s)", j.Spec.Key, j.Spec.Handler)
		log := c.log.With("key", j.Spec.Key, "handler", j.Spec.Handler)
		if j.State == StateStop { // stop before saving, so a new schedule never fires
			if err := c.stopJob(ctx, j.ID); err != nil {
				return fmt.Errorf("stop %s, id %d: %w", name, j.ID, err)
			}
			log.InfoContext(ctx, "stopped job", "job_id", j.ID)
		}
		want := desired(j.Spec, g.ID, ids)
		switch j.Op {
		case OpCreate:
			id, err := c.addJob(ctx, want)
			if err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
			j.ID, ids[j.Spec.Key] = id, id
			log.InfoContext(ctx, "created job", "job_id", id)
		case OpUpdate:
			if err := c.updateJob(ctx, j.ID, want); err != nil {
				return fmt.Errorf("update %s, id %d: %w", name, j.ID, err)
			}
			log.InfoContext(ctx, "updated job", "job_id", j.ID, "fields", changedFields(j.Changes))
		}
		if j.State == StateStart { // after the save: never saved as running
			if err := c.startJob(ctx, j.ID); err != nil {
				return fmt.Errorf("start %s, id %d: %w", name, j.ID, err)
			}
			log.InfoContext(ctx, "started job", "job_id", j.ID)
		}
	}
	for _, s := range p.Strays {
		if s.State != StateStop {
			continue
		}
		if err := c.stopJob(ctx, s.Job.ID); err != nil {
			return fmt.Errorf("stop undeclared job %s, id %d: %w", s.Key, s.Job.ID, err)
		}
		c.log.InfoContext(ctx, "stopped undeclared job", "key", s.Key, "job_id", s.Job.ID)
	}
	return nil
}

// verify reads the admin back: after a successful apply the plan must be
// empty. A difference means the admin stored something other than what was
// sent (a truncated column, a field it ignores).
func verify(ctx context.Context, c *Client, f *JobsFile, applied *Plan) error {
	again, err := readPlan(ctx, c, f, applied.prune)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if !again.Writes() {
		return nil
	}
	var b bytes.Buffer
	again.Print(&b)
	return fmt.Errorf("provision: verify: the admin does not hold what was saved; read back:\n%s", strings.TrimRight(b.String(), "\n"))
}

func changedFields(cs []Change) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Field
	}
	return strings.Join(names, ",")
}
