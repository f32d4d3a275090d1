package fakeconsole

import (
	"cmp"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
)

// Runs: a trigger creates log rows that scripted reads advance.

func (c *Console) jobTrigger(w http.ResponseWriter, form url.Values) {
	p := c.params(w, form, "/jobinfo/trigger")
	id := p.int("id", true, 0)
	param := p.str("executorParam")
	p.str("addressList")
	if p.err {
		return
	}
	j := c.job(id)
	if j == nil {
		if c.opts.Version == V24 {
			c.ok(w, nil) // 2.4.0 answers success for an unknown id
		} else {
			c.fail(w, "任务ID非法")
		}
		return
	}
	n := max(c.run.Shards, 1)
	for i := range n {
		c.nextLog++
		l := &Log{ID: c.nextLog, JobGroup: j.JobGroup, JobID: j.ID, ExecutorHandler: j.ExecutorHandler,
			ExecutorParam: param, ExecutorAddress: fmt.Sprintf("http://127.0.0.1:%d/", 9999+i),
			TriggerCode: 200, TriggerMsg: "任务触发类型：手动触发<br>调度机器：127.0.0.1",
			lines: slices.Clone(c.run.Lines), result: c.run}
		if n > 1 {
			l.ExecutorShardingParam = fmt.Sprintf("%d/%d", i, n)
		}
		if c.run.TriggerMsg != "" {
			l.TriggerCode, l.TriggerMsg, l.ExecutorAddress = 500, c.run.TriggerMsg, ""
		}
		c.logs = append(c.logs, l)
	}
	c.ok(w, nil)
}

func (c *Console) logJSON(l *Log) map[string]any {
	return map[string]any{
		"id": l.ID, "jobGroup": l.JobGroup, "jobId": l.JobID, "executorAddress": nullIfEmpty(l.ExecutorAddress),
		"executorHandler": l.ExecutorHandler, "executorParam": l.ExecutorParam,
		"executorShardingParam": nullIfEmpty(l.ExecutorShardingParam), "executorFailRetryCount": 0,
		"triggerTime": c.stamp(), "triggerCode": l.TriggerCode, "triggerMsg": l.TriggerMsg,
		"handleTime": nil, "handleCode": l.HandleCode, "handleMsg": nullIfEmpty(l.HandleMsg), "alarmStatus": 0,
	}
}

func (c *Console) logList(w http.ResponseWriter, form url.Values) {
	p := c.params(w, form, "/joblog/pageList")
	offset, size := p.page()
	group, job := p.int("jobGroup", true, 0), p.int("jobId", true, 0)
	status := p.int("logStatus", true, 0)
	p.str("filterTime")
	if p.err {
		return
	}
	var rows []*Log
	for _, l := range c.logs {
		if group > 0 && l.JobGroup != group || job > 0 && l.JobID != job {
			continue
		}
		match := true
		switch status {
		case 1:
			match = l.HandleCode == 200
		case 2:
			match = l.TriggerCode == 500 || l.HandleCode > 200
		case 3:
			match = l.TriggerCode == 200 && l.HandleCode == 0
		}
		if match {
			rows = append(rows, l)
		}
	}
	slices.SortFunc(rows, func(a, b *Log) int { return cmp.Compare(b.ID, a.ID) })
	pageTable(c, w, rows, offset, size, c.logJSON)
}

// logCat hands out one line per call, HTML-escaped as 2.4.1+ does; once the
// lines are read the run finishes with its scripted result and the admin
// reports end.
func (c *Console) logCat(w http.ResponseWriter, form url.Values) {
	p := c.params(w, form, "/joblog/logDetailCat")
	id, from := p.int("logId", true, 0), p.int("fromLineNum", true, 0)
	if p.err {
		return
	}
	i := slices.IndexFunc(c.logs, func(l *Log) bool { return l.ID == int64(id) })
	if i < 0 {
		c.fail(w, "日志ID非法")
		return
	}
	l := c.logs[i]
	if l.TriggerCode != 200 {
		c.fail(w, "java.lang.RuntimeException: executor address empty")
		return
	}
	if from >= 1 && from <= len(l.lines) {
		c.ok(w, map[string]any{"fromLineNum": from, "toLineNum": from,
			"logContent": html.EscapeString(l.lines[from-1]) + "\n", "end": false})
		return
	}
	if l.HandleCode == 0 {
		l.HandleCode, l.HandleMsg = l.result.HandleCode, l.result.HandleMsg
	}
	c.ok(w, map[string]any{"fromLineNum": from, "toLineNum": from - 1, "logContent": "", "end": l.HandleCode > 0})
}
