package api

import (
	"net/http"
	"strconv"

	"github.com/orderjob/executor/orders/refunds"
)

// refundAPI serves the refunds view (refunds.Ops) of each order database
// as JSON.
type refundAPI struct {
	r Sourced[*refunds.Ops]
	errorAnswers
}

// MountRefunds mounts the refund routes behind the token check, each on the
// database of ?source= (an order source's name; without it mysql.dsn's):
//
//	GET  /api/refunds?status=owed|refunded&orderNo=&before=&limit=   payment conflicts, newest first
//	GET  /api/refunds/summary                                        refunds owed: count, amount, oldest
//	GET  /api/refunds/{paymentId}                                    one
//	POST /api/refunds/{paymentId}/refunded   {"note": "..."}   record the refund, by the caller ("api")
func (s *Server) MountRefunds(r Sourced[*refunds.Ops]) {
	a := &refundAPI{r: r, errorAnswers: errorAnswers{log: s.base.With("component", "api.refunds"), api: "operator API",
		notFound: refunds.ErrNotFound, conflict: refunds.ErrDone,
		notFoundAnswer: func(r *http.Request) apiError {
			return apiError{Field: "paymentId", Error: "no payment conflict with payment id " + strconv.Quote(r.PathValue("paymentId"))}
		}}}
	s.Handle("GET /api/refunds", http.HandlerFunc(a.list))
	s.Handle("GET /api/refunds/summary", sourceOnly(a.summary))
	s.Handle("GET /api/refunds/{paymentId}", sourceOnly(a.get))
	s.Handle("POST /api/refunds/{paymentId}/refunded", sourceOnly(a.refunded))
}

func (a *refundAPI) list(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "orderNo", "before", "limit", "source") {
		return
	}
	q := r.URL.Query()
	f := refunds.Filter{Status: q.Get("status"), OrderNo: q.Get("orderNo")}
	rf, err := a.r.pick(r)
	if err == nil {
		f.BeforeID, f.Limit, err = pageParams(q)
	}
	var l refunds.Listing
	if err == nil {
		l, err = rf.List(r.Context(), f)
	}
	a.reply(w, r, l, err, apiError{})
}

func (a *refundAPI) summary(w http.ResponseWriter, r *http.Request) {
	replyOn(w, r, a.errorAnswers, a.r, (*refunds.Ops).Owed)
}

func (a *refundAPI) get(w http.ResponseWriter, r *http.Request) {
	rf, err := a.r.pick(r)
	var p *refunds.Conflict
	if err == nil {
		p, err = rf.Get(r.Context(), r.PathValue("paymentId"))
	}
	a.reply(w, r, p, err, apiError{})
}

// refundNote is the body of POST /api/refunds/{paymentId}/refunded: a note.
// Who records the refund is the authenticated caller (Caller: "api" for the
// API's shared token), never the body's word: a "by" in the body is refused.
type refundNote struct {
	Note string `json:"note"`
	By   string `json:"by"`
}

func (a *refundAPI) refunded(w http.ResponseWriter, r *http.Request) {
	rf, err := a.r.pick(r)
	var body refundNote
	if err == nil {
		err = readBody(r, &body, "note", "by")
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	by := Caller(r.Context())
	if body.By != "" && body.By != by {
		a.fail(w, r, invalidInput("by", "by %q: the refund is recorded as the authenticated caller (%q); leave by out", body.By, by))
		return
	}
	p, err := rf.MarkRefunded(r.Context(), r.PathValue("paymentId"), body.Note, by)
	if err == nil {
		a.log.InfoContext(r.Context(), "refund recorded", append([]any{"payment_id", p.PaymentID, "order_no", p.OrderNo,
			"amount", p.Amount, "by", p.RefundedBy}, logSource(r)...)...)
	}
	a.reply(w, r, p, err, apiError{Subject: p})
}
