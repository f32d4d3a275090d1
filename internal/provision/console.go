package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Group is an executor group row as the console lists it.
type Group struct {
	ID          int    `json:"id"`
	AppName     string `json:"appname"`
	Title       string `json:"title"`       // "name" on the branch after 3.4
	AddressType int    `json:"addressType"` // 0 automatic (registry), 1 manual
	AddressList string `json:"addressList"`
	AccessToken string `json:"accessToken"` // the branch after 3.4 only
}

// UnmarshalJSON reads the title under either of its names.
func (g *Group) UnmarshalJSON(b []byte) error {
	type plain Group
	var aux struct {
		plain
		Name *string `json:"name"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*g = Group(aux.plain)
	if aux.Name != nil && g.Title == "" {
		g.Title = *aux.Name
	}
	return nil
}

// Job is a job row as the console lists it. Dates are left out on purpose:
// their format differs between versions and we never compare them.
type Job struct {
	ID            int    `json:"id"`
	GlueType      string `json:"glueType"`
	TriggerStatus int    `json:"triggerStatus"` // 0 stopped, 1 running
	jobFields
}

// UnmarshalJSON reads the description under either of its names (jobDesc,
// "name" on the branch after 3.4).
func (j *Job) UnmarshalJSON(b []byte) error {
	type plain Job
	var aux struct {
		plain
		Name *string `json:"name"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*j = Job(aux.plain)
	if aux.Name != nil && j.JobDesc == "" {
		j.JobDesc = *aux.Name
	}
	return nil
}

// jobFields are the fields /jobinfo/update overwrites, all of them: the
// admin turns an omitted string into null and an omitted number into 0, so
// every save sends the whole set.
type jobFields struct {
	JobGroup               int    `json:"jobGroup"`
	JobDesc                string `json:"jobDesc"`
	Author                 string `json:"author"`
	AlarmEmail             string `json:"alarmEmail"`
	ScheduleType           string `json:"scheduleType"`
	ScheduleConf           string `json:"scheduleConf"`
	MisfireStrategy        string `json:"misfireStrategy"`
	ExecutorRouteStrategy  string `json:"executorRouteStrategy"`
	ExecutorHandler        string `json:"executorHandler"`
	ExecutorParam          string `json:"executorParam"`
	ExecutorBlockStrategy  string `json:"executorBlockStrategy"`
	ExecutorTimeout        int    `json:"executorTimeout"`
	ExecutorFailRetryCount int    `json:"executorFailRetryCount"`
	ChildJobID             string `json:"childJobId"`
}

// field is one console form field, by its form name.
type field struct{ name, value string }

// list returns the fields in the console's order, jobGroup first.
func (f jobFields) list() []field {
	return []field{
		{"jobGroup", strconv.Itoa(f.JobGroup)},
		{"jobDesc", f.JobDesc},
		{"author", f.Author},
		{"alarmEmail", f.AlarmEmail},
		{"scheduleType", f.ScheduleType},
		{"scheduleConf", f.ScheduleConf},
		{"misfireStrategy", f.MisfireStrategy},
		{"executorRouteStrategy", f.ExecutorRouteStrategy},
		{"executorHandler", f.ExecutorHandler},
		{"executorParam", f.ExecutorParam},
		{"executorBlockStrategy", f.ExecutorBlockStrategy},
		{"executorTimeout", strconv.Itoa(f.ExecutorTimeout)},
		{"executorFailRetryCount", strconv.Itoa(f.ExecutorFailRetryCount)},
		{"childJobId", f.ChildJobID},
	}
}

// form is the console form of the fields, the description under api's name.
func (f jobFields) form(api *flavour) url.Values {
	form := url.Values{}
	for _, fl := range f.list() {
		if fl.name == "jobDesc" {
			fl.name = api.descKey
		}
		form.Set(fl.name, fl.value)
	}
	return form
}

// LogRow is a run's log row (one per executor for a broadcast run).
type LogRow struct {
	ID                    int64  `json:"id"`
	JobGroup              int    `json:"jobGroup"`
	JobID                 int    `json:"jobId"`
	ExecutorAddress       string `json:"executorAddress"`
	ExecutorParam         string `json:"executorParam"`
	ExecutorShardingParam string `json:"executorShardingParam"` // "i/n" for broadcast runs
	TriggerCode           int    `json:"triggerCode"`           // 0 not sent yet, 200 ok, 500 failed
	TriggerMsg            string `json:"triggerMsg"`
	HandleCode            int    `json:"handleCode"` // 0 running, 200 success, 500 failure, 502 timeout
	HandleMsg             string `json:"handleMsg"`
}

// logChunk is a piece of a run log read through the admin.
type logChunk struct {
	FromLineNum int    `json:"fromLineNum"`
	ToLineNum   int    `json:"toLineNum"`
	LogContent  string `json:"logContent"`
	End         bool   `json:"end"`
}

// findGroups lists the groups whose appname is exactly appname. The filter
// is a LIKE, so near names come back too and are dropped here.
func (c *Client) findGroups(ctx context.Context, appname string) ([]Group, error) {
	rows, err := listAll[Group](ctx, c, pathGroupList, url.Values{"appname": {appname}, c.api.titleKey: {""}})
	if err != nil {
		return nil, fmt.Errorf("list executor groups: %w", err)
	}
	var out []Group
	for _, g := range rows {
		if g.AppName == appname {
			out = append(out, g)
		}
	}
	return out, nil
}

// groupForm is the console form of a group. Where the group keeps the
// token, every save sends it: an update overwrites it, an omitted one
// clears it.
func (c *Client) groupForm(g Group) url.Values {
	form := url.Values{
		"appname":      {g.AppName},
		c.api.titleKey: {g.Title},
		"addressType":  {strconv.Itoa(g.AddressType)},
		"addressList":  {g.AddressList},
	}
	if c.api.groupToken {
		form.Set("accessToken", g.AccessToken)
	}
	return form
}

// createGroup saves a new group. The admin returns no id: list again.
func (c *Client) createGroup(ctx context.Context, g Group) error {
	_, err := c.envelope(ctx, c.api.groupCreate, c.groupForm(g))
	return err
}

func (c *Client) updateGroup(ctx context.Context, g Group) error {
	form := c.groupForm(g)
	form.Set("id", strconv.Itoa(g.ID))
	_, err := c.envelope(ctx, pathGroupUpdate, form)
	return err
}

// jobListForm is the job list filter. Both names of the description
// filter are sent (each generation requires its own and ignores the other),
// so the version probe can use it before the generation is known.
func jobListForm(groupID int, handler string) url.Values {
	return url.Values{
		"jobGroup":        {strconv.Itoa(groupID)},
		"triggerStatus":   {"-1"},
		"jobDesc":         {""},
		"name":            {""},
		"executorHandler": {handler},
		"author":          {""},
	}
}

// listJobs lists the jobs of a group, all of them when handler is empty
// (otherwise those whose handler contains it).
func (c *Client) listJobs(ctx context.Context, groupID int, handler string) ([]Job, error) {
	jobs, err := listAll[Job](ctx, c, pathJobList, jobListForm(groupID, handler))
	if err != nil {
		return nil, fmt.Errorf("list jobs of group %d: %w", groupID, err)
	}
	return jobs, nil
}

// addJob creates a BEAN job. triggerStatus is never sent: a job saved as
// running with no next fire time counts as misfired at once.
func (c *Client) addJob(ctx context.Context, f jobFields) (int, error) {
	form := f.form(c.api)
	form.Set("glueType", "BEAN")
	form.Set("glueSource", "")
	form.Set("glueRemark", "")
	payload, err := c.envelope(ctx, c.api.jobCreate, form)
	if err != nil {
		return 0, err
	}
	// The new id comes as a string ("12"); accept a number as well.
	var s string
	if json.Unmarshal(payload, &s) != nil {
		s = string(payload)
	}
	id, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("provision: POST %s: expected the new job id, got %q", c.api.jobCreate, c.scrub(string(payload)))
	}
	return id, nil
}

func (c *Client) updateJob(ctx context.Context, id int, f jobFields) error {
	form := f.form(c.api)
	form.Set("id", strconv.Itoa(id))
	_, err := c.envelope(ctx, pathJobUpdate, form)
	return err
}

func (c *Client) startJob(ctx context.Context, id int) error {
	_, err := c.envelope(ctx, pathJobStart, c.api.idForm(id))
	return err
}

func (c *Client) stopJob(ctx context.Context, id int) error {
	_, err := c.envelope(ctx, pathJobStop, c.api.idForm(id))
	return err
}

// checkSchedule asks the admin for the next fire times: read-only, so it
// also serves dry runs, and it judges the cron as the scheduler will.
func (c *Client) checkSchedule(ctx context.Context, scheduleType, conf string) error {
	_, err := c.envelope(ctx, pathNextTrigger, url.Values{"scheduleType": {scheduleType}, "scheduleConf": {conf}})
	return err
}

// triggerJob queues one manual run, as the console's "run once" does. The
// param is always sent: an omitted one runs with an empty param.
func (c *Client) triggerJob(ctx context.Context, id int, param string) error {
	_, err := c.envelope(ctx, pathJobTrigger, url.Values{
		"id": {strconv.Itoa(id)}, "executorParam": {param}, "addressList": {""},
	})
	return err
}

// recentLogs returns the newest log rows of a job (one page, newest first).
func (c *Client) recentLogs(ctx context.Context, groupID, jobID, n int) ([]LogRow, error) {
	form := url.Values{
		"jobGroup":   {strconv.Itoa(groupID)},
		"jobId":      {strconv.Itoa(jobID)},
		"logStatus":  {"-1"},
		"filterTime": {""},
	}
	rows, _, err := c.list(ctx, pathLogList, c.api.page(form, 0, n))
	if err != nil {
		return nil, fmt.Errorf("list runs of job %d: %w", jobID, err)
	}
	var out []LogRow
	if err := json.Unmarshal(rows, &out); err != nil {
		return nil, fmt.Errorf("provision: POST %s: rows not understood: %w", pathLogList, err)
	}
	return out, nil
}

func (c *Client) logCat(ctx context.Context, logID int64, from int) (logChunk, error) {
	payload, err := c.envelope(ctx, pathLogCat, url.Values{
		"logId": {strconv.FormatInt(logID, 10)}, "fromLineNum": {strconv.Itoa(from)},
	})
	if err != nil {
		return logChunk{}, err
	}
	var ch logChunk
	if err := json.Unmarshal(payload, &ch); err != nil || string(payload) == "null" {
		return logChunk{}, fmt.Errorf("provision: POST %s: expected a log chunk, got %q", pathLogCat, c.scrub(string(payload)))
	}
	return ch, nil
}
