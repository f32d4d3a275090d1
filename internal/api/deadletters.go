package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/oplist"
)

// deadLetterAPI serves the dead letters (deadletters.Ops) as JSON.
type deadLetterAPI struct {
	d   *deadletters.Ops
	log *slog.Logger
}

// MountDeadLetters mounts the dead-letter routes behind the token check:
//
//	GET  /api/dead-letters?status=&stage=&before=&limit=   list, newest first
//	GET  /api/dead-letters/{orderNo}?stage=                one letter (stage default close)
//	POST /api/dead-letters/{orderNo}/requeue?stage=        parked or waiting → waiting, due now
//	POST /api/dead-letters/requeue?status=&errorLike=&since=&stage=&dryRun=
//	                                                        every matching letter (RequeueMatching)
func (s *Server) MountDeadLetters(d *deadletters.Ops) {
	a := &deadLetterAPI{d: d, log: s.base.With("component", "api.dead_letters")}
	s.Handle("GET /api/dead-letters", http.HandlerFunc(a.list))
	s.Handle("GET /api/dead-letters/{orderNo}", http.HandlerFunc(a.get))
	s.Handle("POST /api/dead-letters/{orderNo}/requeue", http.HandlerFunc(a.requeue))
	s.Handle("POST /api/dead-letters/requeue", http.HandlerFunc(a.requeueMatching))
}

// deadLetterError is every error answer: what is wrong, with which input,
// and the letter when there is one (a conflict).
type deadLetterError struct {
	Error      string              `json:"error"`
	Field      string              `json:"field,omitempty"`
	DeadLetter *deadletters.Letter `json:"deadLetter,omitempty"`
}

func (a *deadLetterAPI) fail(w http.ResponseWriter, r *http.Request, dl *deadletters.Letter, err error) {
	var inv *oplist.InvalidInputError
	switch {
	case errors.As(err, &inv):
		WriteJSON(w, http.StatusBadRequest, deadLetterError{Error: inv.Msg, Field: inv.Field})
	case errors.Is(err, deadletters.ErrNotFound):
		WriteJSON(w, http.StatusNotFound, deadLetterError{Error: fmt.Sprintf("no %s dead letter for order %q",
			letterStage(r), r.PathValue("orderNo")), Field: "orderNo"})
	case errors.Is(err, deadletters.ErrResolved):
		WriteJSON(w, http.StatusConflict, deadLetterError{Error: err.Error(), DeadLetter: dl})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		a.log.ErrorContext(r.Context(), "dead-letter API", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusInternalServerError, "internal error; see the executor log")
	}
}

// invalidInput is an operator input error naming its field, as the domain
// packages report theirs.
func invalidInput(field, format string, args ...any) error {
	return &oplist.InvalidInputError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func letterStage(r *http.Request) string {
	if s := r.URL.Query().Get("stage"); s != "" {
		return s
	}
	return deadletters.StageClose
}

// onlyQueryParams refuses query parameters other than allowed, so a typo is an
// error instead of an unfiltered answer.
func onlyQueryParams(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	for k := range r.URL.Query() {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			WriteJSON(w, http.StatusBadRequest, deadLetterError{Field: k,
				Error: fmt.Sprintf("unknown query parameter %q (allowed: %v)", k, allowed)})
			return false
		}
	}
	return true
}

func (a *deadLetterAPI) list(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "status", "stage", "before", "limit") {
		return
	}
	q := r.URL.Query()
	f := deadletters.Filter{Status: q.Get("status"), Stage: q.Get("stage")}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			a.fail(w, r, nil, invalidInput("before", "before %q is not a non-negative integer", v))
			return
		}
		f.BeforeID = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			a.fail(w, r, nil, invalidInput("limit", "limit %q is not a positive integer", v))
			return
		}
		f.Limit = n
	}
	dls, err := a.d.List(r.Context(), f)
	if err != nil {
		a.fail(w, r, nil, err)
		return
	}
	ans := deadletters.Listing{DeadLetters: dls}
	if f.Limit == 0 {
		f.Limit = 50
	}
	if len(dls) == f.Limit {
		ans.NextBefore = dls[len(dls)-1].ID
	}
	WriteJSON(w, http.StatusOK, ans)
}

func (a *deadLetterAPI) get(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "stage") {
		return
	}
	dl, err := a.d.Get(r.Context(), r.PathValue("orderNo"), r.URL.Query().Get("stage"))
	if err != nil {
		a.fail(w, r, nil, err)
		return
	}
	WriteJSON(w, http.StatusOK, dl)
}

func (a *deadLetterAPI) requeue(w http.ResponseWriter, r *http.Request) {
	if !onlyQueryParams(w, r, "stage") {
		return
	}
	dl, err := a.d.Requeue(r.Context(), r.PathValue("orderNo"), r.URL.Query().Get("stage"))
	if err != nil {
		a.fail(w, r, dl, err)
		return
	}
	a.log.InfoContext(r.Context(), "dead letter requeued", "order_no", dl.OrderNo, "stage", dl.Stage, "attempts", dl.Attempts)
	WriteJSON(w, http.StatusOK, dl)
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
		a.fail(w, r, nil, err)
		return
	}
	if v := q.Get("dryRun"); v != "" {
		if f.DryRun, err = strconv.ParseBool(v); err != nil {
			a.fail(w, r, nil, invalidInput("dryRun", "dryRun %q is not true or false", v))
			return
		}
	}
	res, err := a.d.RequeueMatching(r.Context(), f)
	if err != nil {
		a.fail(w, r, nil, err)
		return
	}
	if !res.DryRun {
		a.log.InfoContext(r.Context(), "dead letters requeued", "status", f.Status, "error_like", f.ErrorLike,
			"since", res.Since, "num_matched", res.Matched, "num_requeued", res.Requeued)
	}
	WriteJSON(w, http.StatusOK, res)
}
