package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders/deadletters"
)

// The console's actions. Each is a POST: without confirm=yes it answers
// with a page saying what the action will do and a button that sends it
// again confirmed; confirmed, it runs the same domain call as the CLI and
// the JSON API, logs it with the operator's name, and answers with what
// changed.

// confirmData is a confirmation page.
type confirmData struct {
	Action string   // what is about to happen, as a heading
	What   []string // what it will change
	Post   string   // where the confirmed form goes; confirm sets it: the request's own path, with its source
	Fields url.Values
	Back   string
}

// change is one field an action changed.
type change struct {
	Field, Before, After string
}

// doneData is an action's result page.
type doneData struct {
	Action  string
	Summary string
	Changes []change
	Back    string
	BackTo  string
}

func confirmed(r *http.Request) bool { return r.PostFormValue("confirm") == "yes" }

func (c *Console) confirm(w http.ResponseWriter, r *http.Request, op *session, d confirmData) {
	d.Post = withSource(r, r.URL.EscapedPath())
	c.render(w, r, http.StatusOK, "confirm", op, pageData{Title: "Confirm: " + d.Action, Data: d})
}

// confirmedOr reports whether the form is confirmed; when it is not, it
// answers with the confirmation page d.
func (c *Console) confirmedOr(w http.ResponseWriter, r *http.Request, op *session, d confirmData) bool {
	if confirmed(r) {
		return true
	}
	c.confirm(w, r, op, d)
	return false
}

func (c *Console) done(w http.ResponseWriter, r *http.Request, op *session, d doneData) {
	c.render(w, r, http.StatusOK, "done", op, pageData{Title: "Done: " + d.Action, Data: d})
}

// letterChanges lists the fields of a letter that differ between before
// and after.
func letterChanges(before, after *deadletters.Letter) []change {
	return changes(
		change{"status", before.Status, after.Status},
		change{"status reason", before.StatusReason, after.StatusReason},
		change{"next retry at", wallText(before.NextRetryAt), wallText(after.NextRetryAt)},
		change{"attempts", strconv.Itoa(before.Attempts), strconv.Itoa(after.Attempts)})
}

func (c *Console) deadLetterRequeue(w http.ResponseWriter, r *http.Request, op *session) {
	v, id, before, ok := deadLetterRows.lookup(c, w, r, op)
	if !ok {
		return
	}
	back := deadLetterRows.page(r, id)
	move := fmt.Sprintf("status %s → waiting, next retry now", before.Status)
	if before.Status == deadletters.Waiting {
		move = fmt.Sprintf("the letter is already waiting: its next retry moves from %s to now", wallText(before.NextRetryAt))
	}
	if !c.confirmedOr(w, r, op, confirmData{Action: inSource(r, fmt.Sprintf("requeue the %s dead letter of order %s", before.Stage, before.OrderNo)),
		What: []string{move + ": the next deadLetterRetryJob run (and the close sweep) tries the order again",
			fmt.Sprintf("attempts stay %d; a letter that fails again is parked again", before.Attempts)},
		Back: back}) {
		return
	}
	after, err := v.letters.Requeue(r.Context(), before.OrderNo, before.Stage)
	c.audit(r, op, "requeue dead letter", before.OrderNo, err, append([]any{"stage", before.Stage, "letter_id", id}, logSource(r)...)...)
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	d := doneData{Action: fmt.Sprintf("requeued the %s dead letter of order %s", after.Stage, after.OrderNo),
		Summary: "The letter is waiting and due now.", Changes: letterChanges(before, after), Back: back, BackTo: "the letter"}
	if before.Status == deadletters.Waiting {
		d.Summary = "The letter was already waiting; its next retry is now due."
		if len(d.Changes) == 0 {
			d.Summary = "Nothing changed: the letter was already waiting and due."
		}
	}
	c.done(w, r, op, d)
}

func (c *Console) deadLetterRequeueMatching(w http.ResponseWriter, r *http.Request, op *session) {
	f := deadletters.RequeueFilter{Status: strings.ToLower(r.PostFormValue("status")), Stage: r.PostFormValue("stage"),
		ErrorLike: r.PostFormValue("error")}
	v, err := c.viewsOf(r)
	if err == nil {
		f.Since, f.SinceAgo, err = deadletters.ParseSince(r.PostFormValue("since"))
	}
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	fields := url.Values{}
	for _, k := range []string{"status", "stage", "error", "since"} {
		if v := r.PostFormValue(k); v != "" {
			fields.Set(k, v)
		}
	}
	back := withSource(r, consolePath+"dead-letters?"+fields.Encode())
	if !confirmed(r) {
		f.DryRun = true
		res, err := v.letters.RequeueMatching(r.Context(), f)
		if err != nil {
			c.failErr(w, r, op, err)
			return
		}
		move := "each goes to waiting, due now"
		if f.Status == deadletters.Waiting {
			move = "each is already waiting and stays so; its next retry moves to now"
		}
		c.confirm(w, r, op, confirmData{Action: inSource(r, fmt.Sprintf("requeue %d %s dead letter(s)", res.Matched, f.Status)),
			What:   []string{describeRequeue(f, res), move + "; attempts and last errors are kept"},
			Fields: fields, Back: back})
		return
	}
	res, err := v.letters.RequeueMatching(r.Context(), f)
	c.audit(r, op, "requeue dead letters", f.Status, err, append([]any{"stage", f.Stage, "error_like", f.ErrorLike, "since", res.Since,
		"num_matched", res.Matched, "num_requeued", res.Requeued}, logSource(r)...)...)
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	moved := fmt.Sprintf("status %s → waiting", f.Status)
	if f.Status == deadletters.Waiting {
		moved = "already waiting, next retry moved to now"
	}
	c.done(w, r, op, doneData{Action: "requeued dead letters", Summary: res.String() + ".",
		Changes: []change{{"letters matching", "", strconv.Itoa(res.Matched)}, {moved, "", strconv.Itoa(res.Requeued)}},
		Back:    withSource(r, consolePath+"dead-letters?status=waiting"), BackTo: "the waiting letters"})
}

// describeRequeue says which letters a bulk requeue selects.
func describeRequeue(f deadletters.RequeueFilter, res deadletters.RequeueResult) string {
	s := fmt.Sprintf("%d letter(s) in status %s", res.Matched, f.Status)
	if f.Stage != "" {
		s += ", stage " + f.Stage
	}
	if f.ErrorLike != "" {
		s += fmt.Sprintf(", last error containing %q", f.ErrorLike)
	}
	if res.Since != "" {
		s += ", changed since " + res.Since
	}
	return s
}

// taskChanges lists the fields of a task that differ between before and
// after.
func taskChanges(before, after *delay.Task) []change {
	return changes(
		change{"status", string(before.Status), string(after.Status)},
		change{"retry count", strconv.Itoa(before.RetryCount), strconv.Itoa(after.RetryCount)},
		change{"next attempt", utcText(before.NextAttemptTime), utcText(after.NextAttemptTime)})
}

func (c *Console) taskRequeue(w http.ResponseWriter, r *http.Request, op *session) {
	c.taskAction(w, r, op, "requeue", "status FAILED → PENDING with a fresh set of retries, due now", (*delay.Client).Requeue)
}

func (c *Console) taskCancel(w http.ResponseWriter, r *http.Request, op *session) {
	c.taskAction(w, r, op, "cancel", "status → CANCELLED: the task never runs", (*delay.Client).Cancel)
}

// taskAction confirms and runs one action on a task of the request's
// source.
func (c *Console) taskAction(w http.ResponseWriter, r *http.Request, op *session, verb, what string,
	act func(tasks *delay.Client, ctx context.Context, bizUUID string) (*delay.Task, error)) {
	v, before, ok := c.task(w, r, op)
	if !ok {
		return
	}
	biz := r.PathValue("bizUuid")
	back := withSource(r, consolePath+"tasks/"+url.PathEscape(biz))
	if !c.confirmedOr(w, r, op, confirmData{Action: inSource(r, fmt.Sprintf("%s task %s (%s, now %s)", verb, biz, before.Handler, before.Status)),
		What: []string{what}, Back: back}) {
		return
	}
	after, err := act(v.tasks, r.Context(), biz)
	c.audit(r, op, verb+" delayed task", biz, err, append([]any{"trace_id", before.TraceID}, logSource(r)...)...)
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	c.done(w, r, op, doneData{Action: fmt.Sprintf("%s task %s", verb, biz), Summary: "The task is " + string(after.Status) + ".",
		Changes: taskChanges(before, after), Back: back, BackTo: "the task"})
}
