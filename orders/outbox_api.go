package orders

import (
	"log/slog"
	"net/http"

	"github.com/orderjob/executor/internal/api"
)

// OutboxAPI serves the outbox view over HTTP on the executor's API port
// (which adds the token check). Mount it with Mount(srv.Handle).
type OutboxAPI struct {
	o   *Outbox
	log *slog.Logger
}

// NewOutboxAPI builds the HTTP API over o. A nil logger discards.
func NewOutboxAPI(o *Outbox, log *slog.Logger) *OutboxAPI {
	return &OutboxAPI{o: o, log: noLogger(log, "orders.outbox_api")}
}

// Mount registers the routes with mount (e.g. (*api.Server).Handle):
//
//	GET  /api/outbox/events?status=&eventType=&orderNo=&before=&limit=   list, newest first
//	GET  /api/outbox/events/{id}                                         one event
//	GET  /api/outbox/stats                                               pending, oldest pending age, parked
//	POST /api/outbox/events/{id}/requeue                                 parked → pending, due now
//	POST /api/outbox/requeue?eventType=                                  every parked event → pending
func (a *OutboxAPI) Mount(mount func(pattern string, h http.Handler)) {
	mount("GET /api/outbox/events", http.HandlerFunc(a.list))
	mount("GET /api/outbox/events/{id}", http.HandlerFunc(a.get))
	mount("GET /api/outbox/stats", http.HandlerFunc(a.stats))
	mount("POST /api/outbox/events/{id}/requeue", http.HandlerFunc(a.requeue))
	mount("POST /api/outbox/requeue", http.HandlerFunc(a.requeueAll))
}

// Handler returns the routes on a mux of their own, without a token check.
func (a *OutboxAPI) Handler() http.Handler { return opsMux(a.Mount) }

func (a *OutboxAPI) fail(w http.ResponseWriter, r *http.Request, err error, ev *OutboxEvent) {
	opsFail(w, r, a.log, err, ErrOutboxEventNotFound, ErrOutboxNotParked, ev)
}

func (a *OutboxAPI) list(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "eventType", "orderNo", "before", "limit") {
		return
	}
	q := r.URL.Query()
	before, limit, err := pageParams(q)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	l, err := a.o.List(r.Context(), OutboxFilter{Status: q.Get("status"), EventType: q.Get("eventType"),
		OrderNo: q.Get("orderNo"), BeforeID: before, Limit: limit})
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	api.WriteJSON(w, http.StatusOK, l)
}

func (a *OutboxAPI) get(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "id")
	if err == nil {
		var ev *OutboxEvent
		if ev, err = a.o.Get(r.Context(), id); err == nil {
			api.WriteJSON(w, http.StatusOK, ev)
			return
		}
	}
	a.fail(w, r, err, nil)
}

func (a *OutboxAPI) stats(w http.ResponseWriter, r *http.Request) {
	s, err := a.o.Stats(r.Context())
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	api.WriteJSON(w, http.StatusOK, s)
}

func (a *OutboxAPI) requeue(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "id")
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	ev, err := a.o.Requeue(r.Context(), id)
	if err != nil {
		a.fail(w, r, err, ev)
		return
	}
	a.log.InfoContext(r.Context(), "outbox event requeued", "outbox_id", ev.ID, "order_no", ev.OrderNo, "event_type", ev.EventType)
	api.WriteJSON(w, http.StatusOK, ev)
}

// OutboxRequeueResult is the answer of POST /api/outbox/requeue.
type OutboxRequeueResult struct {
	Requeued int `json:"requeued"`
}

func (a *OutboxAPI) requeueAll(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "eventType") {
		return
	}
	n, err := a.o.RequeueParked(r.Context(), r.URL.Query().Get("eventType"))
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	a.log.InfoContext(r.Context(), "parked outbox events requeued", "num_requeued", n)
	api.WriteJSON(w, http.StatusOK, OutboxRequeueResult{Requeued: n})
}
