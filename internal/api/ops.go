package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/orderjob/executor/orders/oplist"
)

// This file holds what the operator APIs of the outbox and the refunds
// share: error answers, paging parameters, JSON bodies.

// opsError is every error answer of those APIs: what is wrong, with which
// input, and the row concerned when there is one (a conflict).
type opsError struct {
	Error   string `json:"error"`
	Field   string `json:"field,omitempty"`
	Subject any    `json:"subject,omitempty"`
}

// opsFail writes the answer for err: 400 for bad input, 404 for notFound,
// 409 (with subject) for conflict, nothing when the client went away, 500
// otherwise (logged).
func opsFail(w http.ResponseWriter, r *http.Request, log *slog.Logger, err, notFound, conflict error, subject any) {
	var inv *oplist.InvalidInputError
	switch {
	case errors.As(err, &inv):
		WriteJSON(w, http.StatusBadRequest, opsError{Error: inv.Msg, Field: inv.Field})
	case notFound != nil && errors.Is(err, notFound):
		WriteJSON(w, http.StatusNotFound, opsError{Error: err.Error()})
	case conflict != nil && errors.Is(err, conflict):
		WriteJSON(w, http.StatusConflict, opsError{Error: err.Error(), Subject: subject})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
	default:
		log.ErrorContext(r.Context(), "operator API", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusInternalServerError, "internal error; see the executor log")
	}
}

// pageParams reads the "before" and "limit" query parameters (absent: 0).
func pageParams(q url.Values) (before int64, limit int, err error) {
	if v := q.Get("before"); v != "" {
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before < 0 {
			return 0, 0, invalidInput("before", "before %q is not a non-negative integer", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			return 0, 0, invalidInput("limit", "limit %q is not a positive integer", v)
		}
	}
	return before, limit, nil
}

// readBody decodes an optional JSON body into v: empty is fine, unknown
// fields are not.
func readBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return invalidInput("body", "body is not the expected JSON: %v", err)
	}
	return nil
}

// pathID reads the positive integer path value name.
func pathID(r *http.Request, name string) (int64, error) {
	v := r.PathValue(name)
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return 0, invalidInput(name, "%s %q is not a positive integer", name, v)
	}
	return id, nil
}
