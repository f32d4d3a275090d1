package api

import (
	"log/slog"
	"net/http"

	"github.com/orderjob/executor/orders/refunds"
)

// refundAPI serves the refunds view (refunds.Ops) as JSON.
type refundAPI struct {
	r   *refunds.Ops
	log *slog.Logger
}

// MountRefunds mounts the refund routes behind the token check:
//
//	GET  /api/refunds?status=owed|refunded&orderNo=&before=&limit=   payment conflicts, newest first
//	GET  /api/refunds/summary                                        refunds owed: count, amount, oldest
//	GET  /api/refunds/{paymentId}                                    one
//	POST /api/refunds/{paymentId}/refunded   {"note": "..."}   record the refund, by the caller ("api")
func (s *Server) MountRefunds(r *refunds.Ops) {
	a := &refundAPI{r: r, log: s.base.With("component", "api.refunds")}
	s.Handle("GET /api/refunds", http.HandlerFunc(a.list))
	s.Handle("GET /api/refunds/summary", http.HandlerFunc(a.summary))
	s.Handle("GET /api/refunds/{paymentId}", http.HandlerFunc(a.get))
	s.Handle("POST /api/refunds/{paymentId}/refunded", http.HandlerFunc(a.refunded))
}

func (a *refundAPI) fail(w http.ResponseWriter, r *http.Request, err error, p *refunds.Conflict) {
	opsFail(w, r, a.log, err, refunds.ErrNotFound, refunds.ErrDone, p)
}

func (a *refundAPI) list(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "orderNo", "before", "limit") {
		return
	}
	q := r.URL.Query()
	before, limit, err := pageParams(q)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	l, err := a.r.List(r.Context(), refunds.Filter{Status: q.Get("status"), OrderNo: q.Get("orderNo"), BeforeID: before, Limit: limit})
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	WriteJSON(w, http.StatusOK, l)
}

func (a *refundAPI) summary(w http.ResponseWriter, r *http.Request) {
	s, err := a.r.Owed(r.Context())
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	WriteJSON(w, http.StatusOK, s)
}

func (a *refundAPI) get(w http.ResponseWriter, r *http.Request) {
	p, err := a.r.Get(r.Context(), r.PathValue("paymentId"))
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	WriteJSON(w, http.StatusOK, p)
}

// refundNote is the body of POST /api/refunds/{paymentId}/refunded: a note.
// Who records the refund is the authenticated caller (Caller: "api" for the
// API's shared token), never the body's word: a "by" in the body is refused.
type refundNote struct {
	Note string `json:"note"`
	By   string `json:"by"`
}

func (a *refundAPI) refunded(w http.ResponseWriter, r *http.Request) {
	var body refundNote
	if err := readBody(r, &body); err != nil {
		a.fail(w, r, err, nil)
		return
	}
	by := Caller(r.Context())
	if body.By != "" && body.By != by {
		a.fail(w, r, invalidInput("by", "by %q: the refund is recorded as the authenticated caller (%q); leave by out", body.By, by), nil)
		return
	}
	p, err := a.r.MarkRefunded(r.Context(), r.PathValue("paymentId"), body.Note, by)
	if err != nil {
		a.fail(w, r, err, p)
		return
	}
	a.log.InfoContext(r.Context(), "refund recorded", "payment_id", p.PaymentID, "order_no", p.OrderNo, "amount", p.Amount, "by", p.RefundedBy)
	WriteJSON(w, http.StatusOK, p)
}
