package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/xxljob/jsonwalk"
)

// This file holds what the JSON operator APIs (dead letters, delayed
// tasks, outbox, refunds) share: error answers, paging parameters, JSON
// bodies.

// apiError is every error answer of those APIs: what is wrong, with which
// input, and the row a conflict concerns, under the key its API has always
// used (deadLetter, task; subject for the outbox and the refunds).
type apiError struct {
	Error      string              `json:"error"`
	Field      string              `json:"field,omitempty"`
	DeadLetter *deadletters.Letter `json:"deadLetter,omitempty"`
	Task       *delay.Task         `json:"task,omitempty"`
	Subject    any                 `json:"subject,omitempty"`
}

// errorAnswers is how one of those APIs answers errors, and its logger.
type errorAnswers struct {
	log      *slog.Logger
	api      string // names the API in the log line of an internal error
	notFound error  // answered 404
	conflict error  // answered 409
	// notFoundAnswer is the body of the 404; nil: the error's text.
	notFoundAnswer func(r *http.Request) apiError
}

// write answers err: 400 for bad input, 413 for a body over the limit,
// 404 for notFound, 409 for conflict (conflictAnswer naming the row, with
// the error's text), nothing when the client went away, 500 otherwise
// (logged).
func (e errorAnswers) write(w http.ResponseWriter, r *http.Request, err error, conflictAnswer apiError) {
	var dinv *delay.InvalidError
	var inv *oplist.InvalidInputError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		WriteJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: fmt.Sprintf("body is larger than %d bytes", tooBig.Limit)})
	case errors.As(err, &dinv):
		WriteJSON(w, http.StatusBadRequest, apiError{Error: dinv.Error(), Field: dinv.Field})
	case errors.As(err, &inv):
		WriteJSON(w, http.StatusBadRequest, apiError{Error: inv.Msg, Field: inv.Field})
	case e.notFound != nil && errors.Is(err, e.notFound):
		ans := apiError{Error: err.Error()}
		if e.notFoundAnswer != nil {
			ans = e.notFoundAnswer(r)
		}
		WriteJSON(w, http.StatusNotFound, ans)
	case e.conflict != nil && errors.Is(err, e.conflict):
		conflictAnswer.Error = err.Error()
		WriteJSON(w, http.StatusConflict, conflictAnswer)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		e.log.ErrorContext(r.Context(), e.api, "method", r.Method, "path", r.URL.Path, "err", err)
		WriteError(w, http.StatusInternalServerError, "internal error; see the executor log")
	}
}

// fail answers an error that concerns no row.
func (e errorAnswers) fail(w http.ResponseWriter, r *http.Request, err error) {
	e.write(w, r, err, apiError{})
}

// reply answers a call: v as JSON with 200, or the answer to err
// (conflictAnswer naming the row concerned, for a conflict).
func (e errorAnswers) reply(w http.ResponseWriter, r *http.Request, v any, err error, conflictAnswer apiError) {
	if err != nil {
		e.write(w, r, err, conflictAnswer)
		return
	}
	WriteJSON(w, http.StatusOK, v)
}

// replyOn answers with what read returns from the view of the request's
// ?source=.
func replyOn[V, T any](w http.ResponseWriter, r *http.Request, e errorAnswers, views Sourced[V],
	read func(V, context.Context) (T, error)) {
	v, err := views.pick(r)
	var t T
	if err == nil {
		t, err = read(v, r.Context())
	}
	e.reply(w, r, t, err, apiError{})
}

// onlyQueryParams refuses query parameters other than allowed, so a typo is an
// error instead of an unfiltered answer.
func onlyQueryParams(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	for k := range r.URL.Query() {
		if !slices.Contains(allowed, k) {
			WriteJSON(w, http.StatusBadRequest, apiError{Field: k,
				Error: fmt.Sprintf("unknown query parameter %q (allowed: %v)", k, allowed)})
			return false
		}
	}
	return true
}

// sourceOnly serves h on a route whose one query parameter is source:
// any other is refused like a list's unknown filter, so a misspelt
// ?source= is an error rather than an action on mysql.dsn's database.
func sourceOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if onlyQueryParams(w, r, "source") {
			h(w, r)
		}
	})
}

// invalidInput is an operator input error naming its field, as the domain
// packages report theirs.
func invalidInput(field, format string, args ...any) error {
	return &oplist.InvalidInputError{Field: field, Msg: fmt.Sprintf(format, args...)}
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

// nextBefore is the "before" of the page after rows, read with limit (0:
// the default, 50): the last row's id when the page is full, 0 when it is
// the last.
func nextBefore[T any](rows []T, limit int, id func(T) int64) int64 {
	if limit == 0 {
		limit = 50
	}
	if len(rows) == limit {
		return id(rows[len(rows)-1])
	}
	return 0
}

// readBody decodes an optional JSON body into v, whose members are
// fields: empty is fine; other members (also the same names in another
// case), a member given twice and anything after the value are not. A
// body over Handle's limit is the *http.MaxBytesError, which write
// answers 413.
func readBody(r *http.Request, v any, fields ...string) error {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return err
	case err != nil:
		return invalidInput("body", "body could not be read: %v", err)
	}
	field, err := decodeExact(body, v, fields, "value")
	if err != nil && !errors.Is(err, io.EOF) {
		return invalidInput(cmp.Or(field, "body"), "%v", err)
	}
	return nil
}

// decodeExact decodes body, one JSON value, into v, whose members are
// fields by their exact names: io.EOF when body is empty, else what is
// wrong with it in the API's words (bodyError, exactMembers) and the
// member at fault when one is. noun names the value in the refusal of
// data after it.
func decodeExact(body []byte, v any, fields []string, noun string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); errors.Is(err, io.EOF) {
		return "", io.EOF
	} else if err != nil {
		return bodyError(err, strings.Join(fields, ", "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) { // More() misses a "]" or "}" after the value
		return "", errors.New("body has data after the JSON " + noun)
	}
	return exactMembers(body, fields...)
}

// exactMembers refuses a JSON object whose members are not named exactly
// as one of fields, or name one twice: encoding/json matches names
// without regard to case, so "BizUuid" or "NOTE" would fill a field that
// DisallowUnknownFields lets through, and the last of two would win. It
// names the member given twice. body has decoded already: a value that
// is not an object is the decoder's to refuse.
func exactMembers(body []byte, fields ...string) (string, error) {
	// It walks body's bytes: a Decoder's tokens and values would copy the
	// body and each value again, twice the cost of the decode itself.
	i := jsonwalk.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return "", nil
	}
	obj := body[i:]
	seen := make([]bool, len(fields))
	for m := range jsonwalk.Members(obj) {
		if m.NameEnd > len(obj) || m.NameEnd-m.Name < 2 || obj[m.Name] != '"' { // not JSON: the decoder's to refuse
			return "", nil
		}
		name := obj[m.Name:m.NameEnd]
		k := fieldIndex(name, fields)
		switch {
		case k < 0:
			return "", fmt.Errorf("unknown field %q (fields: %s)", memberName(name), strings.Join(fields, ", "))
		case seen[k]:
			return fields[k], fmt.Errorf("%s is given twice", fields[k])
		}
		seen[k] = true
	}
	return "", nil
}

// fieldIndex returns the index in fields of the quoted member name, or -1.
func fieldIndex(quoted []byte, fields []string) int {
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') >= 0 { // bytes not UTF-8 match no field either way
		return slices.Index(fields, memberName(quoted))
	}
	for k, f := range fields {
		if f == string(inner) { // no allocation
			return k
		}
	}
	return -1
}

// memberName is a quoted member name as encoding/json reads it: escapes
// undone, bytes that are not UTF-8 as U+FFFD.
func memberName(quoted []byte) string {
	var name string
	_ = json.Unmarshal(quoted, &name) // quoted is a JSON string: it decodes
	return name
}

// bodyError says what is wrong with a JSON body that a Decoder with
// DisallowUnknownFields refused (not an empty one), in the API's words
// rather than Go's, and which field is at fault when one is; fields lists
// the body's fields for an unknown one.
func bodyError(err error, fields string) (string, error) {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "", errors.New("body is not valid JSON: it ends too early")
	case errors.As(err, &se):
		return "", fmt.Errorf("body is not valid JSON at byte %d: %w", se.Offset, err)
	case errors.As(err, &te) && te.Field != "":
		return te.Field, fmt.Errorf("%s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
	case errors.As(err, &te):
		return "", fmt.Errorf("body: expected a JSON object, got JSON %s", te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "", fmt.Errorf("%s (fields: %s)", strings.TrimPrefix(err.Error(), "json: "), fields)
	default:
		return "", fmt.Errorf("body: %w", err)
	}
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
