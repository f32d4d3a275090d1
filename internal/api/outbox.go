package api

import (
	"log/slog"
	"net/http"

	"github.com/orderjob/executor/orders/outbox"
)

// outboxAPI serves the outbox view (outbox.Ops) of each order database
// as JSON.
type outboxAPI struct {
	o   Sourced[*outbox.Ops]
	log *slog.Logger
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
	a := &outboxAPI{o: o, log: s.base.With("component", "api.outbox")}
	s.Handle("GET /api/outbox/events", http.HandlerFunc(a.list))
	s.Handle("GET /api/outbox/events/{id}", http.HandlerFunc(a.get))
	s.Handle("GET /api/outbox/stats", http.HandlerFunc(a.stats))
	s.Handle("POST /api/outbox/events/{id}/requeue", http.HandlerFunc(a.requeue))
	s.Handle("POST /api/outbox/requeue", http.HandlerFunc(a.requeueAll))
}

func (a *outboxAPI) fail(w http.ResponseWriter, r *http.Request, err error, ev *outbox.Event) {
	opsFail(w, r, a.log, err, outbox.ErrNotFound, outbox.ErrNotParked, ev)
}

func (a *outboxAPI) list(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "eventType", "orderNo", "before", "limit", "source") {
		return
	}
	q := r.URL.Query()
	o, err := a.o.pick(r)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	before, limit, err := pageParams(q)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	l, err := o.List(r.Context(), outbox.Filter{Status: q.Get("status"), EventType: q.Get("eventType"),
		OrderNo: q.Get("orderNo"), BeforeID: before, Limit: limit})
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	WriteJSON(w, http.StatusOK, l)
}

// event is the event a route names: its id from the path, and the view of
// the database of ?source=.
func (a *outboxAPI) event(r *http.Request) (*outbox.Ops, int64, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, 0, err
	}
	o, err := a.o.pick(r)
	return o, id, err
}

func (a *outboxAPI) get(w http.ResponseWriter, r *http.Request) {
	o, id, err := a.event(r)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	ev, err := o.Get(r.Context(), id)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	WriteJSON(w, http.StatusOK, ev)
}

func (a *outboxAPI) stats(w http.ResponseWriter, r *http.Request) {
	o, err := a.o.pick(r)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	s, err := o.Stats(r.Context())
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	WriteJSON(w, http.StatusOK, s)
}

func (a *outboxAPI) requeue(w http.ResponseWriter, r *http.Request) {
	o, id, err := a.event(r)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	ev, err := o.Requeue(r.Context(), id)
	if err != nil {
		a.fail(w, r, err, ev)
		return
	}
	a.log.InfoContext(r.Context(), "outbox event requeued", append([]any{"outbox_id", ev.ID, "order_no", ev.OrderNo,
		"event_type", ev.EventType}, logSource(r)...)...)
	WriteJSON(w, http.StatusOK, ev)
}

func (a *outboxAPI) requeueAll(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "eventType", "source") {
		return
	}
	o, err := a.o.pick(r)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	n, err := o.RequeueParked(r.Context(), r.URL.Query().Get("eventType"))
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	a.log.InfoContext(r.Context(), "parked outbox events requeued", append([]any{"num_requeued", n}, logSource(r)...)...)
	WriteJSON(w, http.StatusOK, outbox.RequeueResult{Requeued: n})
}
