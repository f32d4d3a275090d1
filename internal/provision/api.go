package provision

import (
	"net/url"
	"strconv"
)

// flavour is what changes between console API generations (the doc's
// section 1 "version map"). Everything else (form field names, job and log
// row fields, start/stop semantics) is shared, so one table row per
// generation is all a new version costs.
type flavour struct {
	name       string // as in config: "2.4" or "3.4"
	loginPath  string
	cookieName string // session cookie set by a successful login
	// payloadKey is the envelope's payload: ReturnT.content up to 3.2,
	// Response.data from 3.3.
	payloadKey string
	// wrappedLists: 3.3+ list endpoints answer an envelope whose payload is
	// {data,total,offset,pagesize}; older ones a bare
	// {recordsTotal,recordsFiltered,data}.
	wrappedLists bool
	offsetParam  string
	sizeParam    string
	groupCreate  string
	jobCreate    string
	// idParam names the job id on start/stop: `id`, or `ids[]` (exactly one)
	// from 3.3.
	idParam string
	// titleKey and descKey name the group title and the job description:
	// both are "name" on the branch after 3.4.
	titleKey string
	descKey  string
	// groupToken: the group carries the executors' access token (the
	// branch after 3.4 checks executors against it).
	groupToken bool
}

// api24 is 2.4.x (and 2.3.x, 2.5.0, 3.0.x, 3.1.x, which share its paths;
// 3.0+ only makes list filters required, and we always send them).
var api24 = &flavour{
	name:         "2.4",
	loginPath:    "/login",
	cookieName:   "XXL_JOB_LOGIN_IDENTITY",
	payloadKey:   "content",
	wrappedLists: false,
	offsetParam:  "start",
	sizeParam:    "length",
	groupCreate:  "/jobgroup/save",
	jobCreate:    "/jobinfo/add",
	idParam:      "id",
	titleKey:     "title",
	descKey:      "jobDesc",
}

// api34 is 3.3.0 to 3.4.x.
var api34 = &flavour{
	name:         "3.4",
	loginPath:    "/auth/doLogin",
	cookieName:   "xxl_job_login_token",
	payloadKey:   "data",
	wrappedLists: true,
	offsetParam:  "offset",
	sizeParam:    "pagesize",
	groupCreate:  "/jobgroup/insert",
	jobCreate:    "/jobinfo/insert",
	idParam:      "ids[]",
	titleKey:     "title",
	descKey:      "jobDesc",
}

// apiMain is xuxueli/xxl-job's branch after 3.4 (read at commit 128dd678):
// 3.4's console with the group title and the job description renamed
// "name", and the executors' access token kept per group.
var apiMain = func() *flavour {
	f := *api34
	f.name, f.titleKey, f.descKey, f.groupToken = "main", "name", "name", true
	return &f
}()

// Paths shared by every supported generation.
const (
	pathGroupList   = "/jobgroup/pageList"
	pathGroupUpdate = "/jobgroup/update"
	pathJobList     = "/jobinfo/pageList"
	pathJobUpdate   = "/jobinfo/update"
	pathJobStart    = "/jobinfo/start"
	pathJobStop     = "/jobinfo/stop"
	pathJobTrigger  = "/jobinfo/trigger"
	pathNextTrigger = "/jobinfo/nextTriggerTime"
	pathLogList     = "/joblog/pageList"
	pathLogCat      = "/joblog/logDetailCat"
	// pathProbeLogin is where auto-detection posts the login form first: a
	// JSON envelope there means 3.2+, a 404 or a redirect means 2.x-3.1.
	pathProbeLogin = "/auth/doLogin"
)

// flavourByName maps xxl.job.admin.version to a console generation: 3.3
// shares 3.4's console API; "2.4" is the older spelling of "2.x".
func flavourByName(name string) *flavour {
	switch name {
	case "2.x", api24.name:
		return api24
	case "3.3", api34.name:
		return api34
	case apiMain.name:
		return apiMain
	}
	return nil
}

// page adds the paging parameters of this generation to form.
func (f *flavour) page(form url.Values, offset, size int) url.Values {
	form.Set(f.offsetParam, strconv.Itoa(offset))
	form.Set(f.sizeParam, strconv.Itoa(size))
	return form
}

// idForm is the form of start and stop.
func (f *flavour) idForm(id int) url.Values {
	return url.Values{f.idParam: {strconv.Itoa(id)}}
}
