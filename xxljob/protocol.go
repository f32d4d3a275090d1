package xxljob

// This file holds everything that is fixed by the XXL-JOB wire protocol
// (see doc.go): routes, header names, wire structs, codes and the exact
// messages the admin UI shows. What differs between admin generations is in
// dialect.go.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/orderjob/executor/xxljob/jsonwalk"
)

// Result codes of a run, as the admin understands them (handleCode).
const (
	CodeSuccess = 200 // the run succeeded
	CodeFail    = 500 // the run failed, was killed or was discarded
	CodeTimeout = 502 // the run exceeded the job's executorTimeout
)

// Executor endpoints (admin → executor). The raw request path must match
// exactly: "/run?x" and "//run" are unknown paths, as in the Java executor.
const (
	pathBeat     = "/beat"
	pathIdleBeat = "/idleBeat"
	pathRun      = "/run"
	pathTrigger  = "/trigger" // /run renamed on the branch after 3.4
	pathKill     = "/kill"
	pathLog      = "/log"
)

// Admin endpoints (executor → admin), appended to each admin base URL with
// exactly one "/".
const (
	adminRegistry       = "api/registry"
	adminRegistryRemove = "api/registryRemove"
	adminCallback       = "api/callback"
)

const (
	headerAccessToken = "XXL-JOB-ACCESS-TOKEN"
	headerAppName     = "XXL-JOB-APPNAME" // main dialect: the executor group
	contentTypeJSON   = "application/json;charset=UTF-8"

	maxRequestBody  = 5 << 20         // request body limit of the executor server
	maxAdminAnswer  = 1 << 20         // what we read of an admin's answer
	maxHandleMsg    = 50000           // handleMsg longer than this is cut and gets "..."
	maxLogDateMilli = 253402300799999 // 9999-12-31T23:59:59.999Z: keeps log folder names sane

	registryGroupExecutor = "EXECUTOR"
	glueTypeBean          = "BEAN"

	blockSerial       = "SERIAL_EXECUTION"
	blockDiscardLater = "DISCARD_LATER"
	blockCoverEarly   = "COVER_EARLY"
)

// Messages shown in the admin UI; keep them byte-for-byte (note the
// full-width colon U+FF1A in the block strategy messages).
const (
	msgMethodNotSupported = "invalid request, HttpMethod not support."
	msgURIEmpty           = "invalid request, uri-mapping empty."
	msgTokenWrong         = "The access token is wrong."
	msgBusy               = "job thread is running or has trigger queue."
	msgAlreadyKilled      = "job thread already killed."
	msgDiscardLater       = "block strategy effect：Discard Later"
	msgTimeout            = "job execute timeout "
	msgLogNotFound        = "readLog fail, logFile not exists"
	msgRefuseShutdown     = "executor is shutting down, trigger refused"
	msgDraining           = "executor is shutting down, route to another executor"
	msgSuccess            = "Success" // 3.x Response.ofSuccess()
	msgRefuseNotStarted   = "executor is not started, trigger refused"

	reasonCoverEarly    = "block strategy effect：Cover Early"
	reasonChangeHandler = "change jobhandler or glue type, and terminate the old job thread."
	reasonKill          = "scheduling center kill job."
	reasonShutdown      = "web container destroy and kill the job."
	reasonIdle2x        = "excutor idel times over limit." // up to 2.4.x
	reasonIdle          = "excutor idle times over limit." // 2.5.0 and later

	suffixRunningKilled = " [job running, killed]"
	suffixQueuedKilled  = " [job not executed, in the job queue, killed.]"
)

func msgURINotFound(uri string) string {
	return "invalid request, uri-mapping(" + echo(uri) + ") not found."
}
func msgGlueInvalid(glue string) string { return "glueType[" + echo(glue) + "] is not valid." }
func msgGlueNotSupported(desc string) string {
	return "fail, current glue type [" + desc + "] not supported."
}
func msgHandlerNotFound(name string) string { return "job handler [" + echo(name) + "] not found." }

// maxEcho bounds how much of a caller's string an answer repeats, so a
// 5 MiB handler name is not sent back (and logged) whole.
const maxEcho = 256

func echo(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	return s[:runeCut(s, maxEcho)] + "..."
}

// runeCut is the longest prefix length of s up to n bytes that ends on a
// rune boundary.
func runeCut(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// Bounds of a caller's string in a log line: a process log line carries
// at most maxLogField bytes of it (handler names, glue types, messages that
// echo them), a run log's param line at most maxLogParam.
const (
	maxLogField = 256
	maxLogParam = 16 << 10
)

// clip cuts a caller's string for a log line to at most n bytes, on a rune
// boundary, and says so with the original length, so a 4 MiB handler name
// is not written whole into the log and a reader sees that it was cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:runeCut(s, n)] + "...[cut: " + strconv.Itoa(len(s)) + " bytes]"
}
func msgRepeatTrigger(logID int64) string {
	return "repeate trigger job, logId:" + strconv.FormatInt(logID, 10)
}
func msgRepeatTriggerNew(logID int64) string {
	return "repeat trigger job, logId:" + strconv.FormatInt(logID, 10)
}

// msgRequestError can repeat a caller's text (a number of 1 MB of digits in
// a JSON error): clipped like the other echoes.
func msgRequestError(err error) string { return "request error:" + echo(err.Error()) }

// Lines the runner and the callback sender write into a run's log. Java puts
// "<br>" in front; admins from 2.4.2 escape HTML, so we write plain lines.
const (
	lineExecStart      = "----------- xxl-job job execute start -----------"
	lineParamPrefix    = "----------- Param:"
	lineExecEnd        = "----------- xxl-job job execute end(finish) -----------"
	lineExecEndError   = "----------- xxl-job job execute end(error) -----------"
	lineExceptionPfx   = "----------- JobThread Exception:"
	lineTimeout        = "----------- xxl-job job execute timeout"
	lineToStopPfx      = "----------- JobThread toStop, stopReason:"
	lineCallbackFinish = "----------- xxl-job job callback finish."
	lineCallbackFail   = "----------- xxl-job job callback fail, callbackResult:"
)

func lineResult(code int, msg string) string {
	return "----------- Result: handleCode=" + strconv.Itoa(code) + ", handleMsg = " + msg
}

// route returns the handler of an executor endpoint.
func (e *Executor) route(path string) (func(body []byte) returnT, bool) {
	switch path {
	case pathBeat:
		return e.beat, true
	case pathIdleBeat:
		return e.idleBeat, true
	case pathRun, pathTrigger:
		return e.run, true
	case pathKill:
		return e.kill, true
	}
	return nil, false
}

// returnT is the response envelope. Nulls are omitted like Gson does on the
// Java executor, so a 2.x success is literally {"code":200}. Content is the
// 2.x payload field, Data the 3.x one (see dialect.go).
type returnT struct {
	Code    int    `json:"code"`
	Msg     string `json:"msg,omitempty"`
	Content any    `json:"content,omitempty"`
	Data    any    `json:"data,omitempty"`
}

func success() returnT            { return returnT{Code: CodeSuccess} }
func failure(msg string) returnT  { return returnT{Code: CodeFail, Msg: msg} }
func successMsg(m string) returnT { return returnT{Code: CodeSuccess, Msg: m} }

// writeReturn answers with HTTP 200 and the envelope, as the Java executor does
// for every outcome.
func writeReturn(w http.ResponseWriter, rt returnT) {
	b, err := json.Marshal(rt)
	if err != nil { // only reachable with an unencodable payload: still answer an object
		b = []byte(`{"code":500,"msg":"response encoding error"}`)
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// adminReturn is what we read of an admin's answer. Both 2.x (content) and
// 3.3+ (data) envelopes carry the code; everything else is ignored.
type adminReturn struct {
	Code int     `json:"code"`
	Msg  *string `json:"msg"`
}

// triggerParam is the /run body, field order as the admin's Gson writes it.
type triggerParam struct {
	JobID                 int32   `json:"jobId"`
	ExecutorHandler       string  `json:"executorHandler"`
	ExecutorParams        string  `json:"executorParams"`
	ExecutorBlockStrategy string  `json:"executorBlockStrategy"`
	ExecutorTimeout       int32   `json:"executorTimeout"` // seconds, <= 0: no limit
	LogID                 int64   `json:"logId"`
	LogDateTime           int64   `json:"logDateTime"` // epoch ms
	GlueType              *string `json:"glueType"`    // nil: absent or null
	GlueSource            string  `json:"glueSource"`
	GlueUpdatetime        int64   `json:"glueUpdatetime"`
	BroadcastIndex        int32   `json:"broadcastIndex"`
	BroadcastTotal        int32   `json:"broadcastTotal"`
}

// jobIDParam is the body of /idleBeat and /kill.
type jobIDParam struct {
	JobID int32 `json:"jobId"`
}

// logParam is the /log body. Up to 3.4 the trigger time is spelled
// logDateTim; the main dialect spells it logDateTime. Both are read.
type logParam struct {
	LogDateTim  int64 `json:"logDateTim"`
	LogID       int64 `json:"logId"`
	FromLineNum int32 `json:"fromLineNum"`
}

// logParamWire decodes either spelling of the trigger time.
type logParamWire struct {
	LogDateTim  *int64 `json:"logDateTim"`
	LogDateTime *int64 `json:"logDateTime"`
	LogID       int64  `json:"logId"`
	FromLineNum int32  `json:"fromLineNum"`
}

// logResult is the /log payload.
type logResult struct {
	FromLineNum int32  `json:"fromLineNum"`
	ToLineNum   int32  `json:"toLineNum"`
	LogContent  string `json:"logContent"`
	IsEnd       bool   `json:"isEnd"`
}

// registryParam is the body of /api/registry and /api/registryRemove.
type registryParam struct {
	RegistryGroup string `json:"registryGroup"`
	RegistryKey   string `json:"registryKey"`
	RegistryValue string `json:"registryValue"`
}

// callbackParam is one element of the /api/callback array (up to 3.4).
type callbackParam struct {
	LogID      int64  `json:"logId"`
	LogDateTim int64  `json:"logDateTim"`
	HandleCode int    `json:"handleCode"`
	HandleMsg  string `json:"handleMsg,omitempty"`
}

// callbackData is one result in the main dialect's callback object, where
// the trigger time is spelled logDateTime.
type callbackData struct {
	LogID       int64  `json:"logId"`
	LogDateTime int64  `json:"logDateTime"`
	HandleCode  int    `json:"handleCode"`
	HandleMsg   string `json:"handleMsg,omitempty"`
}

// callbackRequest is the main dialect's /api/callback body.
type callbackRequest struct {
	CallbackList []callbackData `json:"callbackList"`
}

// callbackBody builds the /api/callback body of a batch in dialect d.
func callbackBody(d dialect, batch []callbackParam) any {
	if d != dialectMain {
		return batch
	}
	list := make([]callbackData, len(batch))
	for i, p := range batch {
		list[i] = callbackData{LogID: p.LogID, LogDateTime: p.LogDateTim, HandleCode: p.HandleCode, HandleMsg: p.HandleMsg}
	}
	return callbackRequest{CallbackList: list}
}

var (
	errEmptyBody = errors.New("empty request body")
	errNotObject = errors.New("request body is not a JSON object")
)

// decodeObject decodes a request body that must be one JSON object into the
// struct v points to. An empty body or null is an error, as on the Java
// executor (it parses to null). Members match v's fields by their exact
// names, as Gson's do: encoding/json alone also takes "LogId" or "LOGID"
// for logId, so a body naming a field in two spellings would act on
// another value than the Java executor does. A case variant is ignored
// like any unknown member; a name repeated exactly keeps its last value.
func decodeObject(body []byte, v any) error {
	b := bytes.Trim(body, " \t\r\n") // JSON whitespace only
	if len(b) == 0 {
		return errEmptyBody
	}
	if b[0] != '{' {
		return errNotObject
	}
	names := fieldNames(v)
	if !plainMembers(b, names) {
		if err := json.Unmarshal(b, &struct{}{}); err != nil { // the syntax, with encoding/json's messages
			return fmt.Errorf("invalid JSON: %w", err)
		}
		b = exactMembers(b, names)
	}
	// encoding/json checks the whole syntax before it sets a field, so a
	// plain body's syntax error reads as it would above.
	if err := json.Unmarshal(b, v); err != nil { // the types, naming the struct field
		return fmt.Errorf("invalid JSON: %w", err)
	}
	return nil
}

// plainMembers reports whether encoding/json reads obj's members as
// exactMembers would, so obj needs no rewriting: no member name has an
// escape, none is a case variant of a name in names, and none of those
// names comes twice. It reads obj as exactMembers does, trusting nothing
// (obj may not be JSON; false then, and the caller checks the syntax).
// The admin's bodies are plain: they are decoded without being copied.
func plainMembers(obj []byte, names map[string]int) bool {
	var seen uint64 // bit k: the name of field k came
	for m := range jsonwalk.Members(obj) {
		if m.NameEnd > len(obj) || m.NameEnd-m.Name < 2 || obj[m.Name] != '"' || obj[m.NameEnd-1] != '"' {
			return false
		}
		inner := obj[m.Name+1 : m.NameEnd-1]
		if bytes.IndexByte(inner, '\\') >= 0 {
			return false
		}
		if k, ok := names[string(inner)]; ok {
			if k >= 64 || seen&(1<<k) != 0 {
				return false
			}
			seen |= 1 << k
		} else if foldsToAny(inner, names) {
			return false
		}
	}
	return true
}

// foldsToAny reports whether encoding/json would take name for one of
// names (its case-insensitive match is bytes.EqualFold's).
func foldsToAny(name []byte, names map[string]int) bool {
	for n := range names {
		if bytes.EqualFold(name, []byte(n)) {
			return true
		}
	}
	return false
}

// exactMembers returns the valid JSON object obj with only the members
// named in names, each once with its last value, in the order the names
// first appear (so the first type error is the body's first). It walks
// obj's bytes: a decoder's tokens would cost an allocation per member,
// ten times the body's size for one of 200,000 small members.
func exactMembers(obj []byte, names map[string]int) []byte {
	var order []string
	last := make(map[string][]byte, len(names))
	for m := range jsonwalk.Members(obj) {
		if name, ok := memberName(obj[m.Name:m.NameEnd], names); ok {
			if _, seen := last[name]; !seen {
				order = append(order, name)
			}
			last[name] = obj[m.Value:m.ValueEnd]
		}
	}
	out := []byte{'{'}
	for _, name := range order {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, name)
		out = append(out, ':')
		out = append(out, last[name]...)
	}
	return append(out, '}')
}

// memberName returns the name of a quoted member name if it is in names.
func memberName(quoted []byte, names map[string]int) (string, bool) {
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		if _, ok := names[string(inner)]; ok { // no allocation for a name not kept
			return string(inner), true
		}
		return "", false
	}
	var name string
	if json.Unmarshal(quoted, &name) != nil {
		return "", false
	}
	if _, ok := names[name]; !ok {
		return "", false
	}
	return name, true
}

// fieldNameSets holds fieldNames' answer per struct type (a few types,
// each decoded on every request).
var fieldNameSets sync.Map // reflect.Type -> map[string]int

// fieldNames returns the JSON names of the fields of the struct v points
// to, each with its field's index. The map is shared: read it only.
func fieldNames(v any) map[string]int {
	t := reflect.TypeOf(v).Elem()
	if names, ok := fieldNameSets.Load(t); ok {
		return names.(map[string]int)
	}
	names := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names[name] = i
	}
	fieldNameSets.Store(t, names)
	return names
}

func decodeTrigger(body []byte) (triggerParam, error) {
	var p triggerParam
	if err := decodeObject(body, &p); err != nil {
		return p, err
	}
	if err := checkLogRef(p.LogID, p.LogDateTime, "logDateTime"); err != nil {
		return p, err
	}
	if p.BroadcastTotal < 1 {
		p.BroadcastTotal = 1
	}
	return p, nil
}

func decodeJobID(body []byte) (jobIDParam, error) {
	var p jobIDParam
	err := decodeObject(body, &p)
	return p, err
}

func decodeLogParam(body []byte) (logParam, error) {
	var w logParamWire
	if err := decodeObject(body, &w); err != nil {
		return logParam{}, err
	}
	p := logParam{LogID: w.LogID, FromLineNum: w.FromLineNum}
	field := "logDateTim"
	switch {
	case w.LogDateTime != nil:
		p.LogDateTim, field = *w.LogDateTime, "logDateTime"
	case w.LogDateTim != nil:
		p.LogDateTim = *w.LogDateTim
	}
	return p, checkLogRef(p.LogID, p.LogDateTim, field)
}

// checkLogRef validates the two numbers a log file path is built from.
func checkLogRef(logID, logDateMilli int64, field string) error {
	if logID <= 0 {
		return fmt.Errorf("logId must be > 0, got %d", logID)
	}
	if logDateMilli < 0 || logDateMilli > maxLogDateMilli {
		return fmt.Errorf("%s out of range: %d", field, logDateMilli)
	}
	return nil
}

// logTime converts an epoch-ms wire time to a time.Time.
func logTime(ms int64) time.Time { return time.UnixMilli(ms) }
