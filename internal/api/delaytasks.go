package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/orderjob/executor/delay"
)

// MaxRegistrationBytes bounds a delayed-task registration body.
const MaxRegistrationBytes = 128 << 10

// delayAPI serves delayed tasks (delay.Client) as JSON: the order service's
// registrations and the operator's reads and actions, on the tasks of
// each order database.
type delayAPI struct {
	c Sourced[*delay.Client]
	errorAnswers
}

// MountDelayTasks mounts the delayed-task routes behind the token check. c
// should be Dispatcher.Client, so handler names are checked against the
// dispatcher's:
//
//	POST   /api/delay-tasks                     register (201 new, 200 existing)
//	GET    /api/delay-tasks?status=&handler=&before=&limit=   list, newest first
//	GET    /api/delay-tasks/stats               counts, backlog, stuck
//	GET    /api/delay-tasks/check               duplicates and stuck (200 ok, 409 problems)
//	GET    /api/delay-tasks/{bizUuid}           one task
//	DELETE /api/delay-tasks/{bizUuid}           cancel (409 if RUNNING or DONE)
//	POST   /api/delay-tasks/{bizUuid}/requeue   requeue a FAILED task
func (s *Server) MountDelayTasks(c *delay.Client) { s.MountSourcedDelayTasks(HomeOnly(c)) }

// MountSourcedDelayTasks is MountDelayTasks over the tasks of every order
// database: each route takes ?source= (an order source's name; without it
// mysql.dsn's database), the client of that database's dispatcher.
func (s *Server) MountSourcedDelayTasks(c Sourced[*delay.Client]) {
	a := &delayAPI{c: c, errorAnswers: errorAnswers{log: s.base.With("component", "api.delay_tasks"), api: "delay API",
		notFound: delay.ErrNotFound, conflict: delay.ErrConflict,
		notFoundAnswer: func(r *http.Request) apiError {
			return apiError{Field: "bizUuid", Error: "no task with bizUuid " + strconv.Quote(r.PathValue("bizUuid"))}
		}}}
	s.Handle("POST /api/delay-tasks", sourceOnly(a.register))
	s.Handle("GET /api/delay-tasks", http.HandlerFunc(a.list))
	s.Handle("GET /api/delay-tasks/stats", sourceOnly(a.stats))
	s.Handle("GET /api/delay-tasks/check", sourceOnly(a.check))
	s.Handle("GET /api/delay-tasks/{bizUuid}", sourceOnly(a.get))
	s.Handle("DELETE /api/delay-tasks/{bizUuid}", sourceOnly(a.cancel))
	s.Handle("POST /api/delay-tasks/{bizUuid}/requeue", sourceOnly(a.requeue))
}

// registrationFields are RegisterRequest's members, by their exact names.
var registrationFields = []string{"bizUuid", "handler", "executeTime", "delayMs", "payload", "maxRetry"}

// RegisterRequest is the body of POST /api/delay-tasks.
type RegisterRequest struct {
	BizUUID     string          `json:"bizUuid"`
	Handler     string          `json:"handler"`
	ExecuteTime *string         `json:"executeTime,omitempty"` // RFC 3339
	DelayMs     *int64          `json:"delayMs,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	MaxRetry    *int            `json:"maxRetry,omitempty"`
}

// client is the client of the request's ?source=; false when it answered
// that the source is unknown.
func (a *delayAPI) client(w http.ResponseWriter, r *http.Request) (*delay.Client, bool) {
	c, err := a.c.pick(r)
	if err != nil {
		a.fail(w, r, err)
		return nil, false
	}
	return c, true
}

func (a *delayAPI) register(w http.ResponseWriter, r *http.Request) {
	c, ok := a.client(w, r)
	if !ok {
		return
	}
	reg, field, err := decodeRegistration(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if !errors.As(err, &tooBig) {
			err = invalidInput(field, "%v", err)
		}
		a.fail(w, r, err) // 413 for a body over MaxRegistrationBytes, else 400
		return
	}
	t, created, err := c.Register(r.Context(), reg)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/api/delay-tasks/"+t.BizUUID)
	}
	w.Header().Set("X-Trace-Id", t.TraceID)
	WriteJSON(w, status, t)
}

// decodeRegistration reads and checks a body; field names the input at
// fault.
func decodeRegistration(w http.ResponseWriter, r *http.Request) (delay.Registration, string, error) {
	var reg delay.Registration
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRegistrationBytes))
	if err != nil {
		return reg, "", err
	}
	var req RegisterRequest
	if field, err := decodeExact(body, &req, registrationFields, "object"); errors.Is(err, io.EOF) {
		return reg, "", errors.New("body is empty; send a JSON object")
	} else if err != nil {
		return reg, field, err
	}
	reg.BizUUID, reg.Handler = req.BizUUID, req.Handler
	if req.BizUUID == "" {
		return reg, "bizUuid", errors.New("bizUuid is required")
	}
	if req.Handler == "" {
		return reg, "handler", errors.New("handler is required")
	}
	switch {
	case req.ExecuteTime != nil && req.DelayMs != nil:
		return reg, "executeTime", errors.New("give executeTime or delayMs, not both")
	case req.ExecuteTime != nil:
		at, err := time.Parse(time.RFC3339Nano, *req.ExecuteTime)
		if err != nil {
			return reg, "executeTime", fmt.Errorf("executeTime %q is not RFC 3339 (e.g. 2026-01-02T15:04:05+08:00)", *req.ExecuteTime)
		}
		if at.IsZero() { // Registration reads a zero time as "not given": now
			return reg, "executeTime", fmt.Errorf("executeTime %q is before 2000", *req.ExecuteTime)
		}
		reg.ExecuteTime = at
	case req.DelayMs != nil:
		if *req.DelayMs < 0 {
			return reg, "delayMs", fmt.Errorf("delayMs %d is negative", *req.DelayMs)
		}
		if *req.DelayMs > delay.MaxDelay.Milliseconds() {
			return reg, "delayMs", fmt.Errorf("delayMs %d is more than %s", *req.DelayMs, delay.MaxDelay)
		}
		reg.Delay = time.Duration(*req.DelayMs) * time.Millisecond
	default:
		return reg, "executeTime", errors.New("executeTime (RFC 3339) or delayMs is required")
	}
	if len(req.Payload) > 0 {
		reg.Payload = req.Payload
	}
	if req.MaxRetry != nil {
		switch m := *req.MaxRetry; {
		case m < 0 || m > delay.MaxMaxRetry:
			return reg, "maxRetry", fmt.Errorf("maxRetry %d is not in 0..%d", m, delay.MaxMaxRetry)
		case m == 0:
			reg.MaxRetry = -1 // Registration: negative means none
		default:
			reg.MaxRetry = m
		}
	}
	return reg, "", nil
}

// onTask answers with what act returns for the task of the path's
// bizUuid, in the database of ?source=.
func (a *delayAPI) onTask(w http.ResponseWriter, r *http.Request, act func(*delay.Client, context.Context, string) (*delay.Task, error)) {
	c, err := a.c.pick(r)
	var t *delay.Task
	if err == nil {
		t, err = act(c, r.Context(), r.PathValue("bizUuid"))
	}
	a.reply(w, r, t, err, apiError{Task: t})
}

func (a *delayAPI) get(w http.ResponseWriter, r *http.Request) { a.onTask(w, r, (*delay.Client).Get) }

func (a *delayAPI) cancel(w http.ResponseWriter, r *http.Request) {
	a.onTask(w, r, (*delay.Client).Cancel)
}

func (a *delayAPI) requeue(w http.ResponseWriter, r *http.Request) {
	a.onTask(w, r, (*delay.Client).Requeue)
}

// listAnswer is GET /api/delay-tasks: tasks newest first, and the "before"
// value of the next page (0 when this is the last).
type listAnswer struct {
	Tasks      []*delay.Task `json:"tasks"`
	NextBefore int64         `json:"nextBefore"`
}

func (a *delayAPI) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "status", "handler", "before", "limit", "source":
		default:
			WriteJSON(w, http.StatusBadRequest, apiError{Field: k,
				Error: fmt.Sprintf("unknown query parameter %q (status, handler, before, limit, source)", k)})
			return
		}
	}
	f := delay.ListFilter{Status: delay.Status(strings.ToUpper(q.Get("status"))), Handler: q.Get("handler")}
	c, err := a.c.pick(r)
	if err == nil {
		f.BeforeID, f.Limit, err = pageParams(q)
	}
	var tasks []*delay.Task
	if err == nil {
		tasks, err = c.List(r.Context(), f)
	}
	ans := listAnswer{Tasks: tasks, NextBefore: nextBefore(tasks, f.Limit, func(t *delay.Task) int64 { return t.ID })}
	a.reply(w, r, ans, err, apiError{})
}

func (a *delayAPI) stats(w http.ResponseWriter, r *http.Request) {
	replyOn(w, r, a.errorAnswers, a.c, (*delay.Client).Stats)
}

func (a *delayAPI) check(w http.ResponseWriter, r *http.Request) {
	c, ok := a.client(w, r)
	if !ok {
		return
	}
	rep, err := c.Check(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if !rep.OK {
		status = http.StatusConflict
	}
	WriteJSON(w, status, rep)
}
