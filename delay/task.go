package delay

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orderjob/executor/internal/sqlexec"
)

// Status is a task's state in job_delay_task.status.
type Status string

// The states of a task. PENDING → RUNNING → DONE is the happy path; a failed
// attempt goes back to PENDING (with backoff) or, out of retries, to FAILED.
const (
	StatusPending   Status = "PENDING"
	StatusRunning   Status = "RUNNING"
	StatusDone      Status = "DONE"
	StatusFailed    Status = "FAILED"
	StatusCancelled Status = "CANCELLED"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{StatusPending, StatusRunning, StatusDone, StatusFailed, StatusCancelled}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Limits and defaults of a registration.
const (
	DefaultMaxRetry = 3                    // retries after the first attempt
	MaxMaxRetry     = 100                  // largest maxRetry accepted
	MaxDelay        = 366 * 24 * time.Hour // furthest execute time accepted
	MaxPayloadBytes = 60 << 10             // payload_json is a TEXT column (64 KiB)
	MaxBizUUIDLen   = 128
	// HTTPHandlerPrefix starts the name of a task run by POSTing to a
	// configured service: "http:{service}{path}", e.g.
	// "http:order-service/internal/orders/close".
	HTTPHandlerPrefix = "http:"
)

// Errors returned by the Client and the Dispatcher.
var (
	// ErrNotFound: no task has that bizUuid.
	ErrNotFound = errors.New("delay: task not found")
	// ErrConflict: the task is not in a state that allows the operation
	// (cancel a RUNNING or DONE task, requeue a task that is not FAILED).
	ErrConflict = errors.New("delay: task state does not allow this")
)

// InvalidError is a registration the Client refuses; Field names the input at
// fault (bizUuid, handler, executeTime, delayMs, payload, maxRetry).
type InvalidError struct {
	Field string
	Msg   string
}

func (e *InvalidError) Error() string { return "delay: " + e.Field + ": " + e.Msg }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Task is one row of job_delay_task.
type Task struct {
	ID              int64           `db:"id" json:"id"`
	TraceID         string          `db:"trace_id" json:"traceId"`
	BizUUID         string          `db:"biz_uuid" json:"bizUuid"`
	Handler         string          `db:"handler" json:"handler"`
	ExecuteTime     time.Time       `db:"execute_time" json:"executeTime"`
	NextAttemptTime time.Time       `db:"next_attempt_time" json:"nextAttemptTime"`
	Payload         json.RawMessage `db:"payload_json" json:"payload"`
	Status          Status          `db:"status" json:"status"`
	RetryCount      int             `db:"retry_count" json:"retryCount"`
	MaxRetry        int             `db:"max_retry" json:"maxRetry"`
	LastError       string          `db:"last_error" json:"lastError"`
	CreatedAt       time.Time       `db:"created_at" json:"createdAt"`
	UpdatedAt       time.Time       `db:"updated_at" json:"updatedAt"`

	// ClaimID fences the current claim (0 when not RUNNING).
	ClaimID int64 `db:"claim_id" json:"-"`
}

// PayloadValidator checks the payload of a task type at registration, so a
// task that cannot run is refused (400 on the API) instead of failing when
// it falls due. It returns an *InvalidError naming the field at fault
// (e.g. "payload.orderNo"); another error counts as one for "payload".
type PayloadValidator func(payload json.RawMessage) error

// Registration asks for a handler to run at a time, once per BizUUID.
type Registration struct {
	// BizUUID is the caller's idempotency key, e.g. "order-timeout-1001":
	// 1-128 of A-Z a-z 0-9 . _ - : @. Registering it again returns the first
	// task and changes nothing.
	BizUUID string
	// Handler is an in-process handler name (e.g. "orderTimeoutClose") or
	// "http:{service}{path}".
	Handler string
	// ExecuteTime is when to run. Zero means now + Delay. A time in the past
	// runs at once.
	ExecuteTime time.Time
	// Delay is used when ExecuteTime is zero; it counts from the database's
	// clock.
	Delay time.Duration
	// Payload is marshalled to JSON (a json.RawMessage is kept as is); nil
	// stores null.
	Payload any
	// MaxRetry is the number of retries after a failed first attempt. Zero
	// means DefaultMaxRetry; negative means none.
	MaxRetry int
}

var (
	bizUUIDRe     = regexp.MustCompile(`^[A-Za-z0-9._:@-]+$`)
	handlerNameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,127}$`)
	pathRe        = regexp.MustCompile(`^/[A-Za-z0-9/._~%!$&'()*+,;=:@?-]*$`)
	reservedUUIDs = map[string]bool{"stats": true, "check": true}
)

// validBizUUID checks a bizUuid: it appears in URL paths, so its alphabet is
// small (each character stands in a path segment as it is), "stats" and
// "check" name API routes, and "." and ".." are not kept by URL paths.
func validBizUUID(s string) error {
	switch {
	case s == "":
		return invalid("bizUuid", "is required")
	case len(s) > MaxBizUUIDLen:
		return invalid("bizUuid", "is %d characters, at most %d allowed", len(s), MaxBizUUIDLen)
	case !bizUUIDRe.MatchString(s):
		return invalid("bizUuid", "%q has characters outside A-Z a-z 0-9 . _ - : @", s)
	case reservedUUIDs[s]:
		return invalid("bizUuid", "%q is reserved", s)
	case s == "." || s == "..":
		// Every other value of the alphabet is a URL path segment as it
		// stands; these two are removed from paths by clients and by the
		// API's router, so the task could not be opened or cancelled.
		return invalid("bizUuid", "%q is a dot path segment: it cannot appear in a URL path", s)
	}
	return nil
}

// lookupBizUUID refuses, before any SQL, a bizUuid that is not printable
// ASCII: the column is ASCII, and MariaDB fails a comparison with other
// characters ("Illegal mix of collations") instead of finding nothing.
// Other bizUuids no task can have are simply not found.
func lookupBizUUID(s string) error { return asciiFilter("bizUuid", s) }

// asciiFilter refuses a filter on an ASCII column (bizUuid, handler, trace
// id) with other characters, for that reason.
func asciiFilter(field, v string) error {
	if !sqlexec.PrintableASCII(v) {
		return invalid(field, "%q is not printable ASCII", v)
	}
	return nil
}

// ParseHTTPHandler splits "http:{service}{path}" into its service and path.
func ParseHTTPHandler(name string) (service, path string, ok bool) {
	rest, found := strings.CutPrefix(name, HTTPHandlerPrefix)
	if !found {
		return "", "", false
	}
	i := strings.IndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i:], true
}

// checkHandlerSyntax checks a handler name's form, not whether it exists.
func checkHandlerSyntax(name string) error {
	if name == "" {
		return invalid("handler", "is required")
	}
	if len(name) > 255 {
		return invalid("handler", "is %d characters, at most 255 allowed", len(name))
	}
	if strings.HasPrefix(name, HTTPHandlerPrefix) {
		svc, path, ok := ParseHTTPHandler(name)
		if !ok || !handlerNameRe.MatchString(svc) || !pathRe.MatchString(path) {
			return invalid("handler", "%q is not http:{service}/{path}", name)
		}
		if _, err := url.ParseRequestURI(path); err != nil {
			return invalid("handler", "%q has a bad path: %v", name, err)
		}
		if hasDotSegment(path) {
			return invalid("handler", "%q has a . or .. path segment (the call must stay under the service's base URL)", name)
		}
		return nil
	}
	if !handlerNameRe.MatchString(name) {
		return invalid("handler", "%q is not a handler name (letter, then letters, digits, . _ -)", name)
	}
	return nil
}

// hasDotSegment reports a "." or ".." segment in a handler path, also
// percent-encoded or with a ";" parameter (Tomcat reads "..;" as ".."): the
// target server would resolve it, and the call, which carries the service
// token, would leave the service's base path.
func hasDotSegment(p string) bool {
	p, _, _ = strings.Cut(p, "?")
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	for _, seg := range strings.Split(p, "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// marshalPayload returns the payload as compact JSON.
func marshalPayload(p any) ([]byte, error) {
	var b []byte
	switch v := p.(type) {
	case nil:
		return []byte("null"), nil
	case json.RawMessage:
		b = v
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, invalid("payload", "cannot be encoded as JSON: %v", err)
		}
	}
	if !json.Valid(b) {
		return nil, invalid("payload", "is not valid JSON")
	}
	// json.Valid takes any bytes inside a string; payload_json is utf8mb4
	// and refuses them (Error 1366), as JSON itself does (RFC 8259 §8.1).
	if !utf8.Valid(b) {
		return nil, invalid("payload", "is not valid JSON: a string holds bytes that are not UTF-8")
	}
	if len(b) > MaxPayloadBytes {
		return nil, invalid("payload", "is %d bytes, at most %d allowed", len(b), MaxPayloadBytes)
	}
	return b, nil
}

// retryAllowed reports whether a task that has failed n times may run again.
func retryAllowed(failures, maxRetry int) bool { return failures <= maxRetry }

// truncate keeps s within n bytes, dropping a rune cut in half, as text
// the utf8mb4 columns take: runs of bytes that are not UTF-8 (a service's
// reply in GBK) become U+FFFD.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
