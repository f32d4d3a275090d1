package api

import (
	"context"
	"net/http"

	"github.com/orderjob/executor/orders/outbox"
)

// outboxAPI serves the outbox view (outbox.Ops) of each order database
// as JSON.
type outboxAPI struct {
	o Sourced[*outbox.Ops]
	errorAnswers
}

// MountOutbox mounts the outbox routes behind the token check, each on the
// database of ?source= (an order source's name; without it mysql.dsn's):
//
//	GET  /api/outbox/events?status=&eventType=&orderNo=&before=&limit=   list, newest first
//	GET  /api/outbox/events/{id}                                         one event
//	GET  /api/outbox/stats                                               pending, oldest pending age, parked
//	POST /api/outbox/events/{id}/requeue                                 parked → pending, due now
//	POST /api/outbox/requeue?eventType=                                  every parked event → pending
func (s *Server) MountOutbox(o Sourced[*outbox.Ops]) {
	a := &outboxAPI{o: o, errorAnswers: errorAnswers{log: s.base.With("component", "api.outbox"), api: "operator API",
		notFound: outbox.ErrNotFound, conflict: outbox.ErrNotParked,
		notFoundAnswer: func(r *http.Request) apiError {
			return apiError{Field: "id", Error: "no outbox event " + r.PathValue("id")}
		}}}
	s.Handle("GET /api/outbox/events", http.HandlerFunc(a.list))
	s.Handle("GET /api/outbox/events/{id}", sourceOnly(a.get))
	s.Handle("GET /api/outbox/stats", sourceOnly(a.stats))
	s.Handle("POST /api/outbox/events/{id}/requeue", sourceOnly(a.requeue))
	s.Handle("POST /api/outbox/requeue", http.HandlerFunc(a.requeueAll))
}

func (a *outboxAPI) list(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "eventType", "orderNo", "before", "limit", "source") {
		return
	}
	q := r.URL.Query()
	f := outbox.Filter{Status: q.Get("status"), EventType: q.Get("eventType"), OrderNo: q.Get("orderNo")}
	o, err := a.o.pick(r)
	if err == nil {
		f.BeforeID, f.Limit, err = pageParams(q)
	}
	var l outbox.List
	if err == nil {
		l, err = o.List(r.Context(), f)
	}
	a.reply(w, r, l, err, apiError{})
}

// onEvent runs act on the event a route names: its id from the path, in
// the database of ?source=.
func (a *outboxAPI) onEvent(r *http.Request, act func(*outbox.Ops, context.Context, int64) (*outbox.Event, error)) (*outbox.Event, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	o, err := a.o.pick(r)
	if err != nil {
		return nil, err
	}
	return act(o, r.Context(), id)
}

func (a *outboxAPI) get(w http.ResponseWriter, r *http.Request) {
	ev, err := a.onEvent(r, (*outbox.Ops).Get)
	a.reply(w, r, ev, err, apiError{})
}

func (a *outboxAPI) stats(w http.ResponseWriter, r *http.Request) {
	replyOn(w, r, a.errorAnswers, a.o, (*outbox.Ops).Stats)
}

func (a *outboxAPI) requeue(w http.ResponseWriter, r *http.Request) {
	ev, err := a.onEvent(r, (*outbox.Ops).Requeue)
	if err == nil {
		a.log.InfoContext(r.Context(), "outbox event requeued", append([]any{"outbox_id", ev.ID, "order_no", ev.OrderNo,
			"event_type", ev.EventType}, logSource(r)...)...)
	}
	a.reply(w, r, ev, err, apiError{Subject: ev})
}

func (a *outboxAPI) requeueAll(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "eventType", "source") {
		return
	}
	o, err := a.o.pick(r)
	var n int
	if err == nil {
		n, err = o.RequeueParked(r.Context(), r.URL.Query().Get("eventType"))
	}
	if err == nil {
		a.log.InfoContext(r.Context(), "parked outbox events requeued", append([]any{"num_requeued", n}, logSource(r)...)...)
	}
	a.reply(w, r, outbox.RequeueResult{Requeued: n}, err, apiError{})
}
