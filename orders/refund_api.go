package orders

import (
	"log/slog"
	"net/http"

	"github.com/orderjob/executor/internal/api"
)

// RefundAPI serves the refunds view over HTTP on the executor's API port
// (which adds the token check). Mount it with Mount(srv.Handle).
type RefundAPI struct {
	r   *Refunds
	log *slog.Logger
}

// NewRefundAPI builds the HTTP API over r. A nil logger discards.
func NewRefundAPI(r *Refunds, log *slog.Logger) *RefundAPI {
	return &RefundAPI{r: r, log: noLogger(log, "orders.refund_api")}
}

// Mount registers the routes with mount (e.g. (*api.Server).Handle):
//
//	GET  /api/refunds?status=owed|refunded&orderNo=&before=&limit=   payment conflicts, newest first
//	GET  /api/refunds/summary                                        refunds owed: count, amount, oldest
//	GET  /api/refunds/{paymentId}                                    one
//	POST /api/refunds/{paymentId}/refunded   {"note": "..."}         record the refund
func (a *RefundAPI) Mount(mount func(pattern string, h http.Handler)) {
	mount("GET /api/refunds", http.HandlerFunc(a.list))
	mount("GET /api/refunds/summary", http.HandlerFunc(a.summary))
	mount("GET /api/refunds/{paymentId}", http.HandlerFunc(a.get))
	mount("POST /api/refunds/{paymentId}/refunded", http.HandlerFunc(a.refunded))
}

// Handler returns the routes on a mux of their own, without a token check.
func (a *RefundAPI) Handler() http.Handler { return opsMux(a.Mount) }

func (a *RefundAPI) fail(w http.ResponseWriter, r *http.Request, err error, p *PaymentConflict) {
	opsFail(w, r, a.log, err, ErrRefundNotFound, ErrRefundDone, p)
}

func (a *RefundAPI) list(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "orderNo", "before", "limit") {
		return
	}
	q := r.URL.Query()
	before, limit, err := pageParams(q)
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	l, err := a.r.List(r.Context(), RefundFilter{Status: q.Get("status"), OrderNo: q.Get("orderNo"), BeforeID: before, Limit: limit})
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	api.WriteJSON(w, http.StatusOK, l)
}

func (a *RefundAPI) summary(w http.ResponseWriter, r *http.Request) {
	s, err := a.r.Owed(r.Context())
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	api.WriteJSON(w, http.StatusOK, s)
}

func (a *RefundAPI) get(w http.ResponseWriter, r *http.Request) {
	p, err := a.r.Get(r.Context(), r.PathValue("paymentId"))
	if err != nil {
		a.fail(w, r, err, nil)
		return
	}
	api.WriteJSON(w, http.StatusOK, p)
}

// RefundNote is the body of POST /api/refunds/{paymentId}/refunded.
type RefundNote struct {
	Note string `json:"note"`
}

func (a *RefundAPI) refunded(w http.ResponseWriter, r *http.Request) {
	var body RefundNote
	if err := readBody(r, &body); err != nil {
		a.fail(w, r, err, nil)
		return
	}
	p, err := a.r.MarkRefunded(r.Context(), r.PathValue("paymentId"), body.Note)
	if err != nil {
		a.fail(w, r, err, p)
		return
	}
	a.log.InfoContext(r.Context(), "refund recorded", "payment_id", p.PaymentID, "order_no", p.OrderNo, "amount", p.Amount)
	api.WriteJSON(w, http.StatusOK, p)
}
