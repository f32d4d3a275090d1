package xxljobtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// TriggerParam is the /run body; the field order is the admin's (Gson).
type TriggerParam struct {
	JobID                 int    `json:"jobId"`
	ExecutorHandler       string `json:"executorHandler"`
	ExecutorParams        string `json:"executorParams"`
	ExecutorBlockStrategy string `json:"executorBlockStrategy"`
	ExecutorTimeout       int    `json:"executorTimeout"`
	LogID                 int64  `json:"logId"`
	LogDateTime           int64  `json:"logDateTime"`
	GlueType              string `json:"glueType"`
	GlueSource            string `json:"glueSource"`
	GlueUpdatetime        int64  `json:"glueUpdatetime"`
	BroadcastIndex        int    `json:"broadcastIndex"`
	BroadcastTotal        int    `json:"broadcastTotal"`
}

// Trigger returns the TriggerParam the admin sends for a plain BEAN job
// trigger: empty param, SERIAL_EXECUTION, no timeout, no sharding, the
// trigger time now.
func Trigger(jobID int, handler string, logID int64) TriggerParam {
	now := time.Now().UnixMilli()
	return TriggerParam{
		JobID: jobID, ExecutorHandler: handler, ExecutorBlockStrategy: "SERIAL_EXECUTION",
		LogID: logID, LogDateTime: now, GlueType: "BEAN", GlueUpdatetime: now, BroadcastTotal: 1,
	}
}

// LogResult is the /log payload.
type LogResult struct {
	FromLineNum int    `json:"fromLineNum"`
	ToLineNum   int    `json:"toLineNum"`
	LogContent  string `json:"logContent"`
	IsEnd       bool   `json:"isEnd"`
}

// Envelope is a decoded executor answer.
type Envelope struct {
	Code    int             `json:"code"`
	Msg     *string         `json:"msg"`
	Content json.RawMessage `json:"content"`
	Data    json.RawMessage `json:"data"`
	Raw     []byte          `json:"-"` // the body exactly as received
}

// MsgString returns msg, "" if it was null or absent.
func (e Envelope) MsgString() string {
	if e.Msg == nil {
		return ""
	}
	return *e.Msg
}

// Client calls an executor the way the admin does.
type Client struct {
	// AppName is the executor group a Main admin names in XXL-JOB-APPNAME.
	AppName string

	address string // executor address, ends with "/"
	token   string
	version Version
	tr      *http.Transport
	hc      *http.Client
}

// NewClient returns a client for the executor at address (its registryValue,
// e.g. "http://127.0.0.1:9999/"). For Main set AppName. Close it when done.
func NewClient(address, token string, version Version) *Client {
	if !strings.HasSuffix(address, "/") {
		address += "/"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &Client{address: address, token: token, version: version, tr: tr,
		hc: &http.Client{Transport: tr, Timeout: 3 * time.Second}} // the admin's fixed 3 s
}

// SetTimeout replaces the admin's fixed 3 s bound of each call, for tests
// whose calls are slower than any admin would wait (a race-detector build
// answering a 5 MiB body). Set it before the first call.
func (c *Client) SetTimeout(d time.Duration) { c.hc.Timeout = d }

// Close releases idle connections.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// Beat calls /beat with the admin's body ("" in 2.x, none in 3.x).
func (c *Client) Beat(ctx context.Context) (Envelope, error) {
	body := []byte(`""`)
	if c.version.v3() {
		body = nil
	}
	return c.Post(ctx, "beat", body)
}

// IdleBeat calls /idleBeat.
func (c *Client) IdleBeat(ctx context.Context, jobID int) (Envelope, error) {
	return c.postJSON(ctx, "idleBeat", map[string]int{"jobId": jobID})
}

// Run calls /run, in Main /trigger.
func (c *Client) Run(ctx context.Context, p TriggerParam) (Envelope, error) {
	if c.version == Main {
		return c.postJSON(ctx, "trigger", p)
	}
	return c.postJSON(ctx, "run", p)
}

// Kill calls /kill.
func (c *Client) Kill(ctx context.Context, jobID int) (Envelope, error) {
	return c.postJSON(ctx, "kill", map[string]int{"jobId": jobID})
}

// Log calls /log (LogParam up to 3.4, LogRequest in Main) and decodes the
// LogResult from the field this admin generation reads (content for V24,
// data for 3.x); it is nil if absent.
func (c *Client) Log(ctx context.Context, logDateTim, logID int64, fromLineNum int) (Envelope, *LogResult, error) {
	body := fmt.Sprintf(`{"logDateTim":%d,"logId":%d,"fromLineNum":%d}`, logDateTim, logID, fromLineNum)
	if c.version == Main {
		body = fmt.Sprintf(`{"logId":%d,"logDateTime":%d,"fromLineNum":%d}`, logID, logDateTim, fromLineNum)
	}
	env, err := c.Post(ctx, "log", []byte(body))
	if err != nil {
		return env, nil, err
	}
	raw := env.Content
	if c.version.v3() {
		raw = env.Data
	}
	if len(raw) == 0 || string(raw) == "null" {
		return env, nil, nil
	}
	var lr LogResult
	if err := json.Unmarshal(raw, &lr); err != nil {
		return env, nil, fmt.Errorf("xxljobtest: log result: %w", err)
	}
	return env, &lr, nil
}

func (c *Client) postJSON(ctx context.Context, path string, v any) (Envelope, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Envelope{}, err
	}
	return c.Post(ctx, path, b)
}

// Post sends body to {address}{path} with the admin's headers and decodes
// the envelope. A non-200 status or a body that is not a JSON object is an
// error, as for the admin.
func (c *Client) Post(ctx context.Context, path string, body []byte) (Envelope, error) {
	url := c.address + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Envelope{}, err
	}
	req.Header.Set("Content-Type", "application/json;charset=UTF-8")
	req.Header.Set("Accept-Charset", "application/json;charset=UTF-8")
	req.Header.Set("Connection", "Keep-Alive")
	switch {
	case c.version == Main: // the group's token and appname, always
		req.Header.Set("XXL-JOB-ACCESS-TOKEN", c.token)
		req.Header.Set("XXL-JOB-APPNAME", c.AppName)
	case strings.TrimSpace(c.token) != "":
		req.Header.Set("XXL-JOB-ACCESS-TOKEN", c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Envelope{}, fmt.Errorf("xxl-job remoting error(%w), for url : %s", err, url)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Envelope{}, fmt.Errorf("xxl-job remoting error(%w), for url : %s", err, url)
	}
	if resp.StatusCode != http.StatusOK {
		return Envelope{}, fmt.Errorf("xxl-job remoting fail, StatusCode(%d) invalid. for url : %s", resp.StatusCode, url)
	}
	env := Envelope{Raw: raw}
	if len(raw) == 0 || raw[0] != '{' {
		return env, fmt.Errorf("xxl-job remoting (url=%s) response content invalid(%q)", url, raw)
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return env, fmt.Errorf("xxl-job remoting (url=%s) response content invalid(%w)", url, err)
	}
	return env, nil
}

// PageOptions controls PageLog.
type PageOptions struct {
	Interval     time.Duration // poll period; default 3 s as the admin UI
	MaxIdlePolls int           // polls without new lines before giving up; default 20
	// Finished reports whether the admin's job log has a result
	// (handleCode > 0), which is how the admin decides "end". nil: never.
	Finished func() bool
}

// PageResult is what the log page showed.
type PageResult struct {
	Content string // the lines shown, concatenated
	Polls   int    // /log calls made
	End     bool   // stopped on the end condition ("Load/Rolling Log Finish")
	GaveUp  bool   // stopped after MaxIdlePolls polls without new lines
}

// PageLog reads a run log like the admin's job log page: pull from line 1;
// if the run had already finished, stop; otherwise poll, ignoring answers
// with code != 200 or another fromLineNum, appending new lines and
// continuing at toLineNum+1, until fromLineNum > toLineNum while the run is
// finished, or too many polls brought nothing new.
func (c *Client) PageLog(ctx context.Context, logDateTim, logID int64, opt PageOptions) (PageResult, error) {
	if opt.Interval <= 0 {
		opt.Interval = 3 * time.Second
	}
	if opt.MaxIdlePolls <= 0 {
		opt.MaxIdlePolls = 20
	}
	finished := func() bool { return opt.Finished != nil && opt.Finished() }
	var res PageResult
	from := 1
	pull := func() (ended bool, err error) {
		res.Polls++
		// The admin loads the job log row (its handleCode) before it asks
		// the executor for lines, so "finished" is as of before the call.
		done := finished()
		env, lr, err := c.Log(ctx, logDateTim, logID, from)
		if err != nil || env.Code != 200 || lr == nil || lr.FromLineNum != from {
			return false, err
		}
		if from > lr.ToLineNum {
			return done, nil
		}
		res.Content += lr.LogContent
		from = lr.ToLineNum + 1
		return false, nil
	}

	doneAtOpen := finished()
	ended, err := pull()
	if err != nil || ended || doneAtOpen {
		res.End = ended || doneAtOpen
		return res, err
	}
	t := time.NewTicker(opt.Interval)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-t.C:
		}
		if idle++; idle > opt.MaxIdlePolls {
			res.GaveUp = true
			return res, nil
		}
		before := len(res.Content)
		ended, err := pull()
		if err != nil {
			return res, err
		}
		if ended {
			res.End = true
			return res, nil
		}
		if len(res.Content) > before {
			idle = 0
		}
	}
}
