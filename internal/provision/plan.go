package provision

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Op is what a save does to a group or job.
type Op string

// Ops of a plan.
const (
	OpCreate    Op = "create"
	OpUpdate    Op = "update"
	OpUnchanged Op = "unchanged"
)

// StateOp is a change of a job's running state, done by its own call after
// any save (before it when stopping).
type StateOp string

// State changes of a plan.
const (
	StateKeep  StateOp = ""
	StateStart StateOp = "start"
	StateStop  StateOp = "stop"
)

// Change is one field whose value differs: console form name, old, new.
type Change struct {
	Field    string
	Old, New string
}

// GroupPlan is what happens to the executor group.
type GroupPlan struct {
	Op      Op
	ID      int // 0 until created
	Want    Group
	Changes []Change
}

// JobPlan is what happens to one declared job.
type JobPlan struct {
	Spec    *JobSpec
	Op      Op
	State   StateOp
	ID      int // 0 until created
	Changes []Change
	running bool // current state in the admin
}

// StrayPlan is a job in the group that carries a marker no declared job
// matches (removed from the file, or its handler changed).
type StrayPlan struct {
	Job   Job
	Key   string
	State StateOp // StateStop with -prune when it is running
}

// Plan is the difference between the jobs file and the admin.
type Plan struct {
	Group     GroupPlan
	Jobs      []JobPlan   // in file order
	Strays    []StrayPlan // marked but no longer declared
	Unmanaged []Job       // a declared handler without any marker: left alone
	prune     bool
}

// buildPlan compares the file with the admin's state: group is nil when it
// does not exist yet, jobs are all the jobs of the group.
// token is the group's access token where the admin keeps one, else "".
func buildPlan(f *JobsFile, group *Group, jobs []Job, prune bool, token string) (*Plan, error) {
	p := &Plan{prune: prune}
	p.Group = planGroup(f.Group, group, token)

	// Match admin jobs to declared ones by handler + marker key.
	declaredHandler := map[string]bool{}
	for _, j := range f.Jobs {
		declaredHandler[j.Handler] = true
	}
	matches := map[string][]Job{}
	for _, job := range jobs {
		handler := strings.TrimSpace(job.ExecutorHandler)
		key := markerKey(job.JobDesc)
		spec, declared := f.byKey(key)
		switch {
		case key == "":
			if declaredHandler[handler] {
				p.Unmanaged = append(p.Unmanaged, job)
			}
		case declared && spec.Handler == handler:
			matches[key] = append(matches[key], job)
		default:
			sp := StrayPlan{Job: job, Key: key}
			if prune && job.TriggerStatus == 1 {
				sp.State = StateStop
			}
			p.Strays = append(p.Strays, sp)
		}
	}

	ids := map[string]int{} // key -> existing job id, for childJobId
	var problems []string
	for key, ms := range matches {
		if len(ms) > 1 {
			var list []string
			for _, m := range ms {
				list = append(list, strconv.Itoa(m.ID))
			}
			sort.Strings(list)
			problems = append(problems, fmt.Sprintf("job %s: %d jobs in the admin carry its handler and marker (ids %s): "+
				"remove or re-mark all but one in the console", key, len(ms), strings.Join(list, ", ")))
			continue
		}
		if ms[0].GlueType != "BEAN" {
			problems = append(problems, fmt.Sprintf("job %s: admin job %d has glue type %s, which an update cannot change: "+
				"remove it in the console or change the key", key, ms[0].ID, ms[0].GlueType))
			continue
		}
		ids[key] = ms[0].ID
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("provision: the admin's jobs cannot be matched to the file:\n%s", strings.Join(problems, "\n"))
	}

	for i := range f.Jobs {
		spec := &f.Jobs[i]
		jp := JobPlan{Spec: spec, Op: OpCreate}
		want := desired(spec, p.Group.ID, ids)
		if ms := matches[spec.Key]; len(ms) == 1 {
			cur := ms[0]
			jp.ID, jp.running = cur.ID, cur.TriggerStatus == 1
			jp.Changes = diffJob(cur.jobFields, want)
			jp.Op = OpUnchanged
			if len(jp.Changes) > 0 {
				jp.Op = OpUpdate
			}
		}
		switch {
		case spec.Running && !jp.running:
			jp.State = StateStart
		case !spec.Running && jp.running:
			jp.State = StateStop
		}
		p.Jobs = append(p.Jobs, jp)
	}
	return p, nil
}

func planGroup(spec GroupSpec, cur *Group, token string) GroupPlan {
	want := Group{AppName: spec.AppName, Title: spec.Title, AccessToken: token}
	if len(spec.Addresses) > 0 {
		want.AddressType, want.AddressList = 1, strings.Join(spec.Addresses, ",")
	}
	if cur == nil {
		return GroupPlan{Op: OpCreate, Want: want}
	}
	want.ID = cur.ID
	gp := GroupPlan{Op: OpUnchanged, ID: cur.ID, Want: want}
	if cur.Title != want.Title {
		gp.Changes = append(gp.Changes, Change{"title", cur.Title, want.Title})
	}
	if cur.AddressType != want.AddressType {
		gp.Changes = append(gp.Changes, Change{"addressType", strconv.Itoa(cur.AddressType), strconv.Itoa(want.AddressType)})
	}
	// An automatic group's list is the admin's to rewrite from registrations.
	if want.AddressType == 1 && cur.AddressList != want.AddressList {
		gp.Changes = append(gp.Changes, Change{"addressList", cur.AddressList, want.AddressList})
	}
	if token != "" && cur.AccessToken != token { // the values are secrets: never printed
		old := "(another token)"
		if cur.AccessToken == "" {
			old = "(none)"
		}
		gp.Changes = append(gp.Changes, Change{"accessToken", old, "(the executors' token)"})
	}
	if len(gp.Changes) > 0 {
		gp.Op = OpUpdate
	}
	return gp
}

// desired is the full form for spec. A child not created yet is shown by
// its key in angle brackets (dry runs); apply resolves it first.
func desired(spec *JobSpec, groupID int, ids map[string]int) jobFields {
	var children []string
	for _, ck := range spec.ChildJobs {
		if id, ok := ids[ck]; ok {
			children = append(children, strconv.Itoa(id))
		} else {
			children = append(children, "<"+ck+">")
		}
	}
	return jobFields{
		JobGroup:               groupID,
		JobDesc:                spec.JobDesc(),
		Author:                 spec.Author,
		AlarmEmail:             spec.AlarmEmail,
		ScheduleType:           spec.ScheduleType,
		ScheduleConf:           spec.ScheduleConf,
		MisfireStrategy:        spec.Misfire,
		ExecutorRouteStrategy:  spec.Route,
		ExecutorHandler:        spec.Handler,
		ExecutorParam:          spec.Param,
		ExecutorBlockStrategy:  spec.Block,
		ExecutorTimeout:        spec.TimeoutSeconds,
		ExecutorFailRetryCount: spec.FailRetryCount,
		ChildJobID:             normChildren(strings.Join(children, ",")),
	}
}

// diffJob lists the fields of want that differ from cur. jobGroup is equal
// by construction (jobs are listed per group).
func diffJob(cur, want jobFields) []Change {
	cur.ChildJobID = normChildren(cur.ChildJobID)
	var out []Change
	cl, wl := cur.list(), want.list()
	for i := range wl {
		if wl[i].name != "jobGroup" && cl[i].value != wl[i].value {
			out = append(out, Change{wl[i].name, cl[i].value, wl[i].value})
		}
	}
	return out
}

// normChildren sorts a childJobId list, so order alone is no difference.
func normChildren(s string) string {
	var items []string
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	slices.SortFunc(items, func(a, b string) int {
		ai, aerr := strconv.Atoi(a)
		bi, berr := strconv.Atoi(b)
		if aerr == nil && berr == nil {
			return ai - bi
		}
		return strings.Compare(a, b)
	})
	return strings.Join(items, ",")
}

// Counts summarises a plan.
type Counts struct {
	Created, Updated, Unchanged, Started, Stopped int
}

// Counts returns how many jobs each kind of change touches.
func (p *Plan) Counts() Counts {
	var c Counts
	for _, j := range p.Jobs {
		switch j.Op {
		case OpCreate:
			c.Created++
		case OpUpdate:
			c.Updated++
		default:
			c.Unchanged++
		}
		switch j.State {
		case StateStart:
			c.Started++
		case StateStop:
			c.Stopped++
		}
	}
	for _, s := range p.Strays {
		if s.State == StateStop {
			c.Stopped++
		}
	}
	return c
}

// Writes reports whether applying the plan changes anything in the admin.
func (p *Plan) Writes() bool {
	if p.Group.Op != OpUnchanged {
		return true
	}
	for _, j := range p.Jobs {
		if j.Op != OpUnchanged || j.State != StateKeep {
			return true
		}
	}
	for _, s := range p.Strays {
		if s.State != StateKeep {
			return true
		}
	}
	return false
}

// Print writes the plan, one line per group or job, each changed field
// indented below its job.
func (p *Plan) Print(w io.Writer) {
	g := p.Group
	switch g.Op {
	case OpCreate:
		kind := "automatic registration"
		if g.Want.AddressType == 1 {
			kind = "manual addresses " + g.Want.AddressList
		}
		if g.Want.AccessToken != "" {
			kind += ", with the executors' access token"
		}
		fmt.Fprintf(w, "group %s: create (title %q, %s)\n", g.Want.AppName, g.Want.Title, kind)
	default:
		fmt.Fprintf(w, "group %s (id %d): %s\n", g.Want.AppName, g.ID, g.Op)
	}
	printChanges(w, g.Changes)
	for _, j := range p.Jobs {
		id := ""
		if j.ID != 0 {
			id = fmt.Sprintf(", id %d", j.ID)
		}
		what := string(j.Op)
		if j.State != StateKeep {
			if j.Op == OpUnchanged {
				what = string(j.State)
			} else {
				what += ", then " + string(j.State)
			}
		}
		fmt.Fprintf(w, "job %s (%s%s): %s\n", j.Spec.Key, j.Spec.Handler, id, what)
		printChanges(w, j.Changes)
	}
	for _, s := range p.Strays {
		state := "stopped"
		switch {
		case s.State == StateStop:
			state = "stop"
		case s.Job.TriggerStatus == 1:
			state = "running (-prune stops it)"
		}
		fmt.Fprintf(w, "job %s (%s, id %d): no longer declared: %s\n", s.Key, strings.TrimSpace(s.Job.ExecutorHandler), s.Job.ID, state)
	}
	for _, u := range p.Unmanaged {
		fmt.Fprintf(w, "job - (%s, id %d): no %s marker, left alone: %q\n",
			strings.TrimSpace(u.ExecutorHandler), u.ID, markerPrefix+"...]", u.JobDesc)
	}
}

func printChanges(w io.Writer, cs []Change) {
	for _, c := range cs {
		fmt.Fprintf(w, "    %s: %q -> %q\n", c.Field, c.Old, c.New)
	}
}
