package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/orderjob/executor/orders/deadletters"
)

// deadLetterAPI serves the dead letters (deadletters.Ops) of each order
// database as JSON.
type deadLetterAPI struct {
	d Sourced[*deadletters.Ops]
	errorAnswers
}

// MountDeadLetters mounts the dead-letter routes behind the token check,
// each on the database of ?source= (an order source's name; without it
// mysql.dsn's):
//
//	GET  /api/dead-letters?status=&stage=&before=&limit=   list, newest first
//	GET  /api/dead-letters/{orderNo}?stage=                one letter (stage default close)
//	POST /api/dead-letters/{orderNo}/requeue?stage=        parked or waiting → waiting, due now
//	POST /api/dead-letters/requeue?status=&errorLike=&since=&stage=&dryRun=
//	                                                        every matching letter (RequeueMatching)
func (s *Server) MountDeadLetters(d Sourced[*deadletters.Ops]) {
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
	if !onlyQueryParams(w, r, "status", "stage", "before", "limit", "source") {
		return
	}
	q := r.URL.Query()
	f := deadletters.Filter{Status: q.Get("status"), Stage: q.Get("stage")}
	d, err := a.d.pick(r)
	if err == nil {
		f.BeforeID, f.Limit, err = pageParams(q)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	dls, err := d.List(r.Context(), f)
	ans := deadletters.Listing{DeadLetters: dls,
		NextBefore: nextBefore(dls, f.Limit, func(dl deadletters.Letter) int64 { return dl.ID })}
	a.reply(w, r, ans, err, apiError{})
}

// onLetter runs act on the letter a route names: its order number from
// the path and ?stage=, in the database of ?source=.
func (a *deadLetterAPI) onLetter(r *http.Request,
	act func(*deadletters.Ops, context.Context, string, string) (*deadletters.Letter, error)) (*deadletters.Letter, error) {
	d, err := a.d.pick(r)
	if err != nil {
		return nil, err
	}
	return act(d, r.Context(), r.PathValue("orderNo"), r.URL.Query().Get("stage"))
}

func (a *deadLetterAPI) get(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "stage", "source") {
		return
	}
	dl, err := a.onLetter(r, (*deadletters.Ops).Get)
	a.reply(w, r, dl, err, apiError{})
}

func (a *deadLetterAPI) requeue(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "stage", "source") {
		return
	}
	dl, err := a.onLetter(r, (*deadletters.Ops).Requeue)
	if err == nil {
		a.log.InfoContext(r.Context(), "dead letter requeued", append([]any{"order_no", dl.OrderNo, "stage", dl.Stage,
			"attempts", dl.Attempts}, logSource(r)...)...)
	}
	a.reply(w, r, dl, err, apiError{DeadLetter: dl})
}

// requeueMatching answers a RequeueResult: {"matched":N,"requeued":N,"dryRun":false}.
func (a *deadLetterAPI) requeueMatching(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "stage", "errorLike", "since", "dryRun", "source") {
		return
	}
	q := r.URL.Query()
	f := deadletters.RequeueFilter{Status: q.Get("status"), Stage: q.Get("stage"), ErrorLike: q.Get("errorLike")}
	d, err := a.d.pick(r)
	if err == nil {
		f.Since, f.SinceAgo, err = deadletters.ParseSince(q.Get("since"))
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if v := q.Get("dryRun"); v != "" {
		if f.DryRun, err = strconv.ParseBool(v); err != nil {
			a.fail(w, r, invalidInput("dryRun", "dryRun %q is not true or false", v))
			return
		}
	}
	res, err := d.RequeueMatching(r.Context(), f)
	if err == nil && !res.DryRun {
		a.log.InfoContext(r.Context(), "dead letters requeued", append([]any{"status", f.Status, "error_like", f.ErrorLike,
			"since", res.Since, "num_matched", res.Matched, "num_requeued", res.Requeued}, logSource(r)...)...)
	}
	a.reply(w, r, res, err, apiError{})
}
