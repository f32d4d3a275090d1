package fakeconsole

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

type handler func(w http.ResponseWriter, form url.Values)

// routes maps each path of this version to its handler; every other path
// is a 404, as in the admin.
func (c *Console) routes() map[string]handler {
	m := map[string]handler{
		"/jobgroup/pageList":       c.groupList,
		"/jobgroup/update":         func(w http.ResponseWriter, f url.Values) { c.groupSave(w, f, true) },
		"/jobgroup/loadById":       c.groupLoad,
		"/jobinfo/pageList":        c.jobList,
		"/jobinfo/update":          func(w http.ResponseWriter, f url.Values) { c.jobSave(w, f, true) },
		"/jobinfo/start":           func(w http.ResponseWriter, f url.Values) { c.jobState(w, f, 1) },
		"/jobinfo/stop":            func(w http.ResponseWriter, f url.Values) { c.jobState(w, f, 0) },
		"/jobinfo/trigger":         c.jobTrigger,
		"/jobinfo/nextTriggerTime": c.nextTriggerTime,
		"/joblog/pageList":         c.logList,
		"/joblog/logDetailCat":     c.logCat,
	}
	create := func(w http.ResponseWriter, f url.Values) { c.groupSave(w, f, false) }
	add := func(w http.ResponseWriter, f url.Values) { c.jobSave(w, f, false) }
	if c.opts.Version == V24 {
		m["/jobgroup/save"], m["/jobinfo/add"], m["/jobinfo/remove"] = create, add, c.jobRemove
	} else {
		m["/jobgroup/insert"], m["/jobinfo/insert"], m["/jobinfo/delete"] = create, add, c.jobRemove
	}
	return m
}

// params reads request parameters with Spring's rules: a missing required
// one is an error envelope, a non-numeric int a 400. From 3.0 list filters
// are all required; in 2.4 strings are optional.
type params struct {
	c    *Console
	w    http.ResponseWriter
	form url.Values
	path string
	err  bool
}

func (p *params) int(name string, required bool, def int) int {
	if p.err {
		return 0
	}
	v, ok := p.form[name]
	if !ok {
		if required {
			p.c.missing(p.w, name, "int")
			p.err = true
		}
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v[0]))
	if err != nil {
		badRequest(p.w, p.path)
		p.err = true
	}
	return n
}

// str reads a string filter: required from 3.0.
func (p *params) str(name string) string {
	if p.err {
		return ""
	}
	v, ok := p.form[name]
	if !ok {
		if p.c.opts.Version != V24 {
			p.c.missing(p.w, name, "String")
			p.err = true
		}
		return ""
	}
	return v[0]
}

// page reads the paging parameters of this version.
func (p *params) page() (offset, size int) {
	if p.c.opts.Version == V24 {
		return p.int("start", false, 0), p.int("length", false, 10)
	}
	return p.int("offset", false, 0), p.int("pagesize", false, 10)
}

func (c *Console) params(w http.ResponseWriter, form url.Values, path string) *params {
	return &params{c: c, w: w, form: form, path: path}
}

func pageOf[T any](rows []T, offset, size int) []T {
	if offset >= len(rows) || offset < 0 {
		return nil
	}
	return rows[offset:min(len(rows), offset+max(size, 0))]
}

// pageTable answers a list request with the page of rows from offset,
// each as toJSON renders it.
func pageTable[T any](c *Console, w http.ResponseWriter, rows []T, offset, size int, toJSON func(T) map[string]any) {
	var out []any
	for _, r := range pageOf(rows, offset, size) {
		out = append(out, toJSON(r))
	}
	c.table(w, out, len(rows), offset, size)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (c *Console) stamp() string {
	if c.opts.Version == V24 {
		return "2025-10-22T10:10:56.000+00:00"
	}
	return "2025-10-22 18:10:56"
}

func (c *Console) job(id int) *Job {
	for _, j := range c.jobs {
		if j.ID == id {
			return j
		}
	}
	return nil
}

func (c *Console) jobJSON(j *Job) map[string]any {
	return map[string]any{
		"id": j.ID, "jobGroup": j.JobGroup, c.descKey: j.JobDesc, "addTime": c.stamp(), "updateTime": c.stamp(),
		"author": j.Author, "alarmEmail": nullIfEmpty(j.AlarmEmail), "scheduleType": j.ScheduleType,
		"scheduleConf": j.ScheduleConf, "misfireStrategy": j.MisfireStrategy,
		"executorRouteStrategy": j.ExecutorRouteStrategy, "executorHandler": j.ExecutorHandler,
		"executorParam": nullIfEmpty(j.ExecutorParam), "executorBlockStrategy": j.ExecutorBlockStrategy,
		"executorTimeout": j.ExecutorTimeout, "executorFailRetryCount": j.ExecutorFailRetryCount,
		"glueType": j.GlueType, "glueSource": nil, "glueRemark": nil, "glueUpdatetime": c.stamp(),
		"childJobId": nullIfEmpty(j.ChildJobID), "triggerStatus": j.TriggerStatus,
		"triggerLastTime": 0, "triggerNextTime": 0,
	}
}

func (c *Console) jobList(w http.ResponseWriter, form url.Values) {
	p := c.params(w, form, "/jobinfo/pageList")
	offset, size := p.page()
	group := p.int("jobGroup", true, 0)
	status := p.int("triggerStatus", true, 0)
	desc, handler, author := p.str(c.descKey), p.str("executorHandler"), p.str("author")
	if p.err {
		return
	}
	var rows []*Job
	for _, j := range c.jobs {
		if (group <= 0 || j.JobGroup == group) && (status < 0 || j.TriggerStatus == status) &&
			strings.Contains(j.JobDesc, desc) && strings.Contains(j.ExecutorHandler, handler) && strings.Contains(j.Author, author) {
			rows = append(rows, j)
		}
	}
	slices.SortFunc(rows, func(a, b *Job) int { return cmp.Compare(b.ID, a.ID) }) // newest first
	pageTable(c, w, rows, offset, size, c.jobJSON)
}

var (
	routeNames = []string{"FIRST", "LAST", "ROUND", "RANDOM", "CONSISTENT_HASH", "LEAST_FREQUENTLY_USED",
		"LEAST_RECENTLY_USED", "FAILOVER", "BUSYOVER", "SHARDING_BROADCAST"}
	blockNames = []string{"SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY"}
	glueNames  = []string{"BEAN", "GLUE_GROOVY", "GLUE_SHELL", "GLUE_PYTHON", "GLUE_PHP", "GLUE_NODEJS", "GLUE_POWERSHELL"}
)

// jobSave is add (insert) and update: the same checks, in the admin's order,
// then a full overwrite (an omitted string is stored empty, an int 0).
func (c *Console) jobSave(w http.ResponseWriter, form url.Values, update bool) {
	p := c.params(w, form, "/jobinfo/add")
	var j Job
	j.JobGroup = p.int("jobGroup", false, 0)
	j.ExecutorTimeout = p.int("executorTimeout", false, 0)
	j.ExecutorFailRetryCount = p.int("executorFailRetryCount", false, 0)
	j.TriggerStatus = p.int("triggerStatus", false, 0) // bound if sent, as the admin does
	id := p.int("id", false, 0)
	if p.err {
		return
	}
	s := form.Get
	j.JobDesc, j.Author, j.AlarmEmail = s(c.descKey), s("author"), s("alarmEmail")
	j.ScheduleType, j.ScheduleConf, j.MisfireStrategy = s("scheduleType"), s("scheduleConf"), s("misfireStrategy")
	j.ExecutorRouteStrategy, j.ExecutorHandler, j.ExecutorParam = s("executorRouteStrategy"), s("executorHandler"), s("executorParam")
	j.ExecutorBlockStrategy, j.ChildJobID, j.GlueType = s("executorBlockStrategy"), s("childJobId"), s("glueType")

	var cur *Job
	if update {
		if cur = c.job(id); cur == nil {
			c.fail(w, "参数非法")
			return
		}
	}
	groupOK := slices.ContainsFunc(c.groups, func(g *Group) bool { return g.ID == j.JobGroup })
	_, hasConf := form["scheduleConf"]
	var msg string
	switch {
	case !groupOK && update:
		msg = "执行器非法"
	case !groupOK:
		msg = "请选择执行器"
	case strings.TrimSpace(j.JobDesc) == "":
		msg = "请输入任务描述"
	case strings.TrimSpace(j.Author) == "":
		msg = "请输入负责人"
	case !slices.Contains([]string{"CRON", "FIX_RATE", "NONE"}, j.ScheduleType):
		msg = "调度类型非法"
	case !hasConf && j.ScheduleType != "NONE":
		msg = "java.lang.NullPointerException"
	case j.ScheduleType == "CRON" && !validCron(j.ScheduleConf):
		msg = "Cron格式非法"
	case j.ScheduleType == "FIX_RATE" && !positiveInt(j.ScheduleConf):
		msg = "调度类型非法"
	case !update && !slices.Contains(glueNames, j.GlueType):
		msg = "运行模式非法"
	case (update && cur.GlueType == "BEAN" || !update && j.GlueType == "BEAN") && strings.TrimSpace(j.ExecutorHandler) == "":
		msg = "请输入JobHandler"
	case !slices.Contains(routeNames, j.ExecutorRouteStrategy):
		msg = "路由策略非法"
	case !slices.Contains([]string{"DO_NOTHING", "FIRE_ONCE_NOW"}, j.MisfireStrategy):
		msg = "调度过期策略非法"
	case !slices.Contains(blockNames, j.ExecutorBlockStrategy):
		msg = "阻塞处理策略非法"
	default:
		msg = c.checkChildren(j.ChildJobID)
	}
	if msg != "" {
		c.fail(w, msg)
		return
	}
	if update {
		j.ID, j.GlueType, j.TriggerStatus = cur.ID, cur.GlueType, cur.TriggerStatus
		*cur = j
		c.ok(w, nil)
		return
	}
	c.nextID++
	j.ID = c.nextID
	c.jobs = append(c.jobs, &j)
	c.ok(w, strconv.Itoa(j.ID))
}

func (c *Console) checkChildren(list string) string {
	if list == "" {
		return ""
	}
	for _, it := range strings.Split(list, ",") {
		id, err := strconv.Atoi(it)
		if err != nil {
			return fmt.Sprintf("子任务ID(%s)非法", it)
		}
		if c.job(id) == nil {
			return fmt.Sprintf("子任务ID(%d)不存在", id)
		}
	}
	return ""
}

// validCron is a rough Quartz check: 6-7 fields, '?' in day-of-month or
// day-of-week, plain numbers within range for seconds, minutes and hours.
func validCron(s string) bool {
	f := strings.Fields(s)
	if len(f) < 6 || len(f) > 7 || (f[3] == "?") == (f[5] == "?") {
		return false
	}
	limits := []int{59, 59, 23}
	for i, lim := range limits {
		if n, err := strconv.Atoi(f[i]); err == nil && (n < 0 || n > lim) {
			return false
		}
	}
	return true
}

func positiveInt(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1
}

// jobID reads the job id of start/stop/remove: `id` in 2.4, `ids[]` with
// exactly one value in 3.4.
func (c *Console) jobID(w http.ResponseWriter, form url.Values, path string) (int, bool) {
	if c.opts.Version == V24 {
		p := c.params(w, form, path)
		id := p.int("id", true, 0)
		return id, !p.err
	}
	ids, ok := form["ids[]"]
	if !ok {
		c.missing(w, "ids[]", "List")
		return 0, false
	}
	if len(ids) != 1 {
		c.fail(w, "仅支持单个任务操作")
		return 0, false
	}
	id, err := strconv.Atoi(ids[0])
	if err != nil {
		badRequest(w, path)
		return 0, false
	}
	return id, true
}

func (c *Console) jobState(w http.ResponseWriter, form url.Values, status int) {
	id, ok := c.jobID(w, form, "/jobinfo/start")
	if !ok {
		return
	}
	j := c.job(id)
	switch {
	case j == nil && c.opts.Version == V24:
		c.fail(w, "java.lang.NullPointerException")
	case j == nil:
		c.fail(w, "任务ID非法")
	case status == 1 && j.ScheduleType == "NONE":
		c.fail(w, "当前调度类型禁止启动")
	default:
		j.TriggerStatus = status
		c.ok(w, nil)
	}
}

func (c *Console) jobRemove(w http.ResponseWriter, form url.Values) {
	id, ok := c.jobID(w, form, "/jobinfo/remove")
	if !ok {
		return
	}
	c.jobs = slices.DeleteFunc(c.jobs, func(j *Job) bool { return j.ID == id })
	c.ok(w, nil)
}

func (c *Console) nextTriggerTime(w http.ResponseWriter, form url.Values) {
	typ, conf := form.Get("scheduleType"), form.Get("scheduleConf")
	if _, ok := form["scheduleConf"]; !ok {
		c.missing(w, "scheduleConf", "String")
		return
	}
	ok := typ == "NONE" || typ == "CRON" && validCron(conf) || typ == "FIX_RATE" && positiveInt(conf)
	if !ok {
		c.fail(w, "调度类型非法"+"Illegal characters for this position")
		return
	}
	times := []string{"2025-10-22 18:11:00", "2025-10-22 18:12:00", "2025-10-22 18:13:00", "2025-10-22 18:14:00", "2025-10-22 18:15:00"}
	if typ == "NONE" {
		times = []string{}
	}
	c.ok(w, times)
}
