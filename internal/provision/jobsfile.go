package provision

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// JobsFile is a parsed and validated jobs file: the executor group and the
// jobs the admin should hold, every console setting spelled out.
type JobsFile struct {
	Path  string
	Group GroupSpec
	Jobs  []JobSpec
}

// GroupSpec is the declared executor group.
type GroupSpec struct {
	AppName   string   // from the config (xxl.job.executor.appname), not the file
	Title     string   // 4-12 characters
	Addresses []string // empty: automatic registration; else a manual address list
}

// JobSpec is one declared job, defaults applied.
type JobSpec struct {
	Key            string // marker key, unique in the file; default: the handler
	Handler        string
	Desc           string // shown in the console; the marker is appended to it
	Author         string
	AlarmEmail     string
	ScheduleType   string // CRON, FIX_RATE or NONE
	ScheduleConf   string
	Misfire        string // DO_NOTHING or FIRE_ONCE_NOW
	Route          string
	Block          string
	Param          string
	TimeoutSeconds int
	FailRetryCount int
	ChildJobs      []string // keys of other declared jobs
	Running        bool
}

// Marker is the text kept in the console's job description that marks the
// job as ours: "[prov:KEY]".
func (j JobSpec) Marker() string { return markerPrefix + j.Key + "]" }

// JobDesc is the description stored in the admin: desc, a space, the marker.
func (j JobSpec) JobDesc() string { return j.Desc + " " + j.Marker() }

const (
	markerPrefix = "[prov:"
	// maxDesc is the console's UI cap on the description: the column holds
	// 255, but a longer text blocks later edits in the console.
	maxDesc = 50
)

var (
	markerRE = regexp.MustCompile(`\[prov:([A-Za-z0-9_.-]+)\]`)
	keyRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`)

	scheduleTypes = []string{"CRON", "FIX_RATE", "NONE"}
	misfires      = []string{"DO_NOTHING", "FIRE_ONCE_NOW"}
	routes        = []string{"FIRST", "LAST", "ROUND", "RANDOM", "CONSISTENT_HASH", "LEAST_FREQUENTLY_USED",
		"LEAST_RECENTLY_USED", "FAILOVER", "BUSYOVER", "SHARDING_BROADCAST"}
	blocks = []string{"SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY"}
)

// markerKey returns the key of the last marker in a job description, or "".
func markerKey(jobDesc string) string {
	m := markerRE.FindAllStringSubmatch(jobDesc, -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

// YAML shapes. Pointers tell "absent" (take the default) from a zero value.
type fileYAML struct {
	Group    groupYAML `yaml:"group"`
	Defaults jobYAML   `yaml:"defaults"`
	Jobs     []jobYAML `yaml:"jobs"`
}

type groupYAML struct {
	Title     string   `yaml:"title"`
	Addresses []string `yaml:"addresses"`
}

type jobYAML struct {
	Key            *string  `yaml:"key"`
	Handler        *string  `yaml:"handler"`
	Desc           *string  `yaml:"desc"`
	Author         *string  `yaml:"author"`
	AlarmEmail     *string  `yaml:"alarmEmail"`
	ScheduleType   *string  `yaml:"scheduleType"`
	ScheduleConf   *string  `yaml:"scheduleConf"`
	Misfire        *string  `yaml:"misfireStrategy"`
	Route          *string  `yaml:"routeStrategy"`
	Block          *string  `yaml:"blockStrategy"`
	Param          *string  `yaml:"param"`
	TimeoutSeconds *int     `yaml:"timeoutSeconds"`
	FailRetryCount *int     `yaml:"failRetryCount"`
	ChildJobs      []string `yaml:"childJobs"`
	Running        *bool    `yaml:"running"`
}

// Built-in defaults, below the file's `defaults:` section.
var builtinDefaults = JobSpec{
	Author:       "provision",
	ScheduleType: "CRON",
	Misfire:      "DO_NOTHING",
	Route:        "FIRST",
	Block:        "SERIAL_EXECUTION",
}

// ParseJobsFile parses and validates a jobs file; name is used in messages.
// Every problem is reported at once.
func ParseJobsFile(name string, data []byte, appname string) (*JobsFile, error) {
	var raw fileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt key is an error, not a silent default
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("jobs file %s: %w", name, err)
	}
	lines := jobLines(data)

	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	f := &JobsFile{Path: name, Group: GroupSpec{
		AppName: appname, Title: strings.TrimSpace(raw.Group.Title), Addresses: raw.Group.Addresses,
	}}
	if n := len(appname); n < 4 || n > 64 || strings.ContainsAny(appname, "<>") {
		bad("appname %q (xxl.job.executor.appname): the admin wants 4-64 characters without < or >", appname)
	}
	if n := utf8.RuneCountInString(f.Group.Title); n < 4 || n > 12 || strings.ContainsAny(f.Group.Title, "<>") {
		bad("group.title %q: needs 4-12 characters without < or > (the admin's column is 12 wide before 3.4)", f.Group.Title)
	}
	for _, a := range f.Group.Addresses {
		if !strings.HasPrefix(a, "http://") && !strings.HasPrefix(a, "https://") || strings.ContainsAny(a, ",<> ") {
			bad("group.addresses: %q is not an executor URL (http://host:port/)", a)
		}
	}

	d := raw.Defaults
	if d.Key != nil || d.Handler != nil || d.Desc != nil || d.ScheduleConf != nil || d.ChildJobs != nil {
		bad("defaults: key, handler, desc, scheduleConf and childJobs belong to each job, not to defaults")
	}
	if len(raw.Jobs) == 0 {
		bad("jobs: none declared")
	}
	keys := map[string]int{}
	for i, rj := range raw.Jobs {
		j := mergeJob(builtinDefaults, d, rj)
		where := fmt.Sprintf("jobs[%d]", i)
		if i < len(lines) {
			where = fmt.Sprintf("line %d: jobs[%d]", lines[i], i)
		}
		if j.Handler != "" {
			where += " (" + j.Handler + ")"
		}
		for _, err := range validateJob(&j, rj) {
			bad("%s: %v", where, err)
		}
		if prev, dup := keys[j.Key]; dup && j.Key != "" {
			bad("%s: key %q is also used by jobs[%d]; give each job its own key", where, j.Key, prev)
		}
		keys[j.Key] = i
		f.Jobs = append(f.Jobs, j)
	}
	for i, j := range f.Jobs {
		for _, ck := range j.ChildJobs {
			if _, ok := keys[ck]; !ok {
				bad("jobs[%d] (%s): childJobs: %q is not the key of a declared job", i, j.Handler, ck)
			} else if ck == j.Key {
				bad("jobs[%d] (%s): childJobs: a job cannot be its own child", i, j.Handler)
			}
		}
	}
	if len(problems) == 0 {
		if _, err := f.saveOrder(); err != nil {
			bad("%v", err)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("jobs file %s: %d problem(s):\n%w", name, len(problems), errors.Join(problems...))
	}
	return f, nil
}

// jobLines returns the line of each item under `jobs:`, for messages.
func jobLines(data []byte) []int {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "jobs" {
			var out []int
			for _, item := range m.Content[i+1].Content {
				out = append(out, item.Line)
			}
			return out
		}
	}
	return nil
}

// mergeJob layers the job over the file's defaults over the built-ins.
func mergeJob(base JobSpec, layers ...jobYAML) JobSpec {
	j := base
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = strings.TrimSpace(*src)
		}
	}
	for _, l := range layers {
		set(&j.Key, l.Key)
		set(&j.Handler, l.Handler)
		set(&j.Desc, l.Desc)
		set(&j.Author, l.Author)
		set(&j.AlarmEmail, l.AlarmEmail)
		set(&j.ScheduleType, l.ScheduleType)
		set(&j.ScheduleConf, l.ScheduleConf)
		set(&j.Misfire, l.Misfire)
		set(&j.Route, l.Route)
		set(&j.Block, l.Block)
		if l.Param != nil {
			j.Param = *l.Param // a param's spaces may matter: kept as written
		}
		if l.TimeoutSeconds != nil {
			j.TimeoutSeconds = *l.TimeoutSeconds
		}
		if l.FailRetryCount != nil {
			j.FailRetryCount = *l.FailRetryCount
		}
		if l.ChildJobs != nil {
			j.ChildJobs = l.ChildJobs
		}
	}
	if j.Key == "" {
		j.Key = j.Handler
	}
	// Running: the job's own setting, else the defaults', else true, except
	// for NONE, which cannot be started.
	j.Running = j.ScheduleType != "NONE"
	for _, l := range layers {
		if l.Running != nil {
			j.Running = *l.Running
		}
	}
	return j
}

// validateJob checks the rules the admin enforces (section 7 of the API
// doc), and the UI and column limits it does not, before anything is sent.
func validateJob(j *JobSpec, raw jobYAML) []error {
	var p []error
	bad := func(format string, args ...any) { p = append(p, fmt.Errorf(format, args...)) }
	runes := utf8.RuneCountInString

	if j.Handler == "" {
		bad("handler: required (the JobHandler name the executor registers)")
	} else if runes(j.Handler) > 100 || strings.ContainsAny(j.Handler, " \t,") {
		bad("handler %q: at most 100 characters, no spaces or commas", j.Handler)
	}
	if !keyRE.MatchString(j.Key) {
		bad("key %q: 1-40 characters of letters, digits, '.', '_' or '-'", j.Key)
	}
	if j.Desc == "" {
		bad("desc: required (the console needs a description)")
	} else if strings.Contains(j.Desc, markerPrefix) {
		bad("desc: must not contain %q: the marker is added for you", markerPrefix)
	} else if n := runes(j.JobDesc()); n > maxDesc {
		bad("desc: %q plus the marker %q makes %d characters; the console allows %d: shorten desc or set a shorter key",
			j.Desc, " "+j.Marker(), n, maxDesc)
	}
	if j.Author == "" || runes(j.Author) > 50 {
		bad("author %q: 1-50 characters", j.Author)
	}
	if runes(j.AlarmEmail) > 100 {
		bad("alarmEmail: at most 100 characters")
	}
	if !slices.Contains(scheduleTypes, j.ScheduleType) {
		bad("scheduleType %q: one of %s", j.ScheduleType, strings.Join(scheduleTypes, ", "))
	} else if err := checkScheduleConf(j.ScheduleType, j.ScheduleConf); err != nil {
		bad("scheduleConf: %v", err)
	}
	if !slices.Contains(misfires, j.Misfire) {
		bad("misfireStrategy %q: one of %s", j.Misfire, strings.Join(misfires, ", "))
	}
	if !slices.Contains(routes, j.Route) {
		bad("routeStrategy %q: one of %s", j.Route, strings.Join(routes, ", "))
	}
	if !slices.Contains(blocks, j.Block) {
		bad("blockStrategy %q: one of %s", j.Block, strings.Join(blocks, ", "))
	}
	if len(j.Param) > 512 {
		bad("param: %d bytes; the admin's column holds 512", len(j.Param))
	}
	if j.TimeoutSeconds < 0 {
		bad("timeoutSeconds %d: 0 (none) or more", j.TimeoutSeconds)
	}
	if j.FailRetryCount < 0 {
		bad("failRetryCount %d: 0 (none) or more", j.FailRetryCount)
	}
	if j.ScheduleType == "NONE" && raw.Running != nil && *raw.Running {
		bad("running: a job with scheduleType NONE cannot be started (the admin refuses)")
	}
	return p
}

// checkScheduleConf checks the shape of the schedule locally; the admin
// judges the cron itself later (nextTriggerTime), before any write.
func checkScheduleConf(typ, conf string) error {
	switch typ {
	case "CRON":
		f := strings.Fields(conf)
		if len(f) < 6 || len(f) > 7 {
			return fmt.Errorf("cron %q: the admin wants 6 or 7 fields, seconds first (\"0 */5 * * * ?\")", conf)
		}
		if f[3] != "?" && f[5] != "?" {
			return fmt.Errorf("cron %q: day-of-month or day-of-week must be '?' (Quartz)", conf)
		}
	case "FIX_RATE":
		if n, err := strconv.Atoi(conf); err != nil || n < 1 {
			return fmt.Errorf("%q: FIX_RATE wants whole seconds, at least 1", conf)
		}
	case "NONE":
		if conf != "" {
			return fmt.Errorf("%q: must be empty for NONE", conf)
		}
	}
	if len(conf) > 128 {
		return errors.New("at most 128 characters")
	}
	return nil
}

// saveOrder returns the job indexes with every child before its parents, so
// a parent's childJobId can name ids that exist; a cycle is an error.
func (f *JobsFile) saveOrder() ([]int, error) {
	index := map[string]int{}
	for i, j := range f.Jobs {
		index[j.Key] = i
	}
	const (
		unseen = iota
		visiting
		done
	)
	state := make([]int, len(f.Jobs))
	var order []int
	var visit func(i int, path []string) error
	visit = func(i int, path []string) error {
		switch state[i] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("childJobs form a cycle: %s", strings.Join(append(path, f.Jobs[i].Key), " -> "))
		}
		state[i] = visiting
		for _, ck := range f.Jobs[i].ChildJobs {
			if err := visit(index[ck], append(path, f.Jobs[i].Key)); err != nil {
				return err
			}
		}
		state[i] = done
		order = append(order, i)
		return nil
	}
	for i := range f.Jobs {
		if err := visit(i, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// byKey returns the declared job with key, if any.
func (f *JobsFile) byKey(key string) (*JobSpec, bool) {
	for i := range f.Jobs {
		if f.Jobs[i].Key == key {
			return &f.Jobs[i], true
		}
	}
	return nil, false
}
