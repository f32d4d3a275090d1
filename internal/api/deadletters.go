package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/orderjob/executor/orders/deadletters"
)

// deadLetterAPI serves the dead letters (deadletters.Ops) as JSON.
type deadLetterAPI struct {
	d *deadletters.Ops
	errorAnswers
}

// MountDeadLetters mounts the dead-letter routes behind the token check:
//
//	GET  /api/dead-letters?status=&stage=&before=&limit=   list, newest first
//	GET  /api/dead-letters/{orderNo}?stage=                one letter (stage default close)
//	POST /api/dead-letters/{orderNo}/requeue?stage=        parked or waiting → waiting, due now
//	POST /api/dead-letters/requeue?status=&errorLike=&since=&stage=&dryRun=
//	                                                        every matching letter (RequeueMatching)
func (s *Server) MountDeadLetters(d *deadletters.Ops) {
	a := &deadLetterAPI{d: d, errorAnswers: errorAnswers{log: s.base.With("component", "api.dead_letters"),
		api: "dead-letter API", notFound: deadletters.ErrNotFound, conflict: deadletters.ErrResolved,
		notFoundAnswer: func(r *http.Request) apiError {
			return apiError{Field: "orderNo", Error: fmt.Sprintf("no %s dead letter for order %q", letterStage(r), r.PathValue("orderNo"))}
		}}}
	s.Handle("GET /api/dead-letters", http.HandlerFunc(a.list))
	s.Handle("GET /api/dead-letters/{orderNo}", http.HandlerFunc(a.get))
	s.Handle("POST /api/dead-letters/{orderNo}/requeue", http.HandlerFunc(a.requeue))
	s.Handle("POST /api/dead-letters/requeue", http.HandlerFunc(a.requeueMatching))
}

func letterStage(r *http.Request) string {
	if s := r.URL.Query().Get("stage"); s != "" {
		return s
	}
	return deadletters.StageClose
}

func (a *deadLetterAPI) list(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "stage", "before", "limit") {
		return
	}
	q := r.URL.Query()
	f := deadletters.Filter{Status: q.Get("status"), Stage: q.Get("stage")}
	var err error
	if f.BeforeID, f.Limit, err = pageParams(q); err != nil {
		a.fail(w, r, err)
		return
	}
	dls, err := a.d.List(r.Context(), f)
	ans := deadletters.Listing{DeadLetters: dls,
		NextBefore: nextBefore(dls, f.Limit, func(dl deadletters.Letter) int64 { return dl.ID })}
	a.reply(w, r, ans, err, apiError{})
}

func (a *deadLetterAPI) get(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "stage") {
		return
	}
	dl, err := a.d.Get(r.Context(), r.PathValue("orderNo"), r.URL.Query().Get("stage"))
	a.reply(w, r, dl, err, apiError{})
}

func (a *deadLetterAPI) requeue(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "stage") {
		return
	}
	dl, err := a.d.Requeue(r.Context(), r.PathValue("orderNo"), r.URL.Query().Get("stage"))
	if err == nil {
		a.log.InfoContext(r.Context(), "dead letter requeued", "order_no", dl.OrderNo, "stage", dl.Stage, "attempts", dl.Attempts)
	}
	a.reply(w, r, dl, err, apiError{DeadLetter: dl})
}

// requeueMatching answers a RequeueResult: {"matched":N,"requeued":N,"dryRun":false}.
func (a *deadLetterAPI) requeueMatching(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "stage", "errorLike", "since", "dryRun") {
		return
	}
	q := r.URL.Query()
	f := deadletters.RequeueFilter{Status: q.Get("status"), Stage: q.Get("stage"), ErrorLike: q.Get("errorLike")}
	var err error
	if f.Since, f.SinceAgo, err = deadletters.ParseSince(q.Get("since")); err != nil {
		a.fail(w, r, err)
		return
	}
	if v := q.Get("dryRun"); v != "" {
		if f.DryRun, err = strconv.ParseBool(v); err != nil {
			a.fail(w, r, invalidInput("dryRun", "dryRun %q is not true or false", v))
			return
		}
	}
	res, err := a.d.RequeueMatching(r.Context(), f)
	if err == nil && !res.DryRun {
		a.log.InfoContext(r.Context(), "dead letters requeued", "status", f.Status, "error_like", f.ErrorLike,
			"since", res.Since, "num_matched", res.Matched, "num_requeued", res.Requeued)
	}
	a.reply(w, r, res, err, apiError{})
}
