package xxljob

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/orderjob/executor/xxljob/authguard"
)

// msgTooManyFailures answers an address refused for failed token checks
// (HTTP 429): authguard's bucket, ten failures at once, then one a second.
const msgTooManyFailures = "too many failed access token checks from this address: slow down"

// ServeHTTP serves the admin's calls: POST /beat, /idleBeat, /run (also
// /trigger, its name after 3.4), /kill and /log. Every answer is HTTP 200
// with a JSON envelope, errors included, as the admin expects, but for a
// body over 5 MiB (a bare 413, see tooLarge) and an address refused for
// failed token checks (429). The checks run in the Java executor's order:
// body size (a declared Content-Length at once, a chunked body when read),
// method, empty path, access token (and, in the main dialect, the
// XXL-JOB-APPNAME header), path. The path must match exactly, so mount
// the executor at a server root (http.StripPrefix works too).
func (e *Executor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > maxRequestBody {
		// Read up to the limit as for any body, so that a client writing
		// the whole body before reading (the admin's HttpURLConnection)
		// meets the answer rather than a reset when only a little over.
		_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxRequestBody))
		tooLarge(w)
		return
	}
	if r.Method != http.MethodPost {
		writeReturn(w, failure(msgMethodNotSupported))
		return
	}
	uri := r.URL.EscapedPath()
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		uri += "?" + r.URL.RawQuery
	}
	if uri == "" {
		writeReturn(w, failure(msgURIEmpty))
		return
	}
	host := authguard.Host(r.RemoteAddr)
	if ok, wait := e.guard.Allow(host); !ok {
		// Before the token is compared: a refused address learns nothing.
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(failure(msgTooManyFailures))
		return
	}
	msg, mainHint := e.authorize(r.Header, uri)
	if msg != "" {
		e.guard.Failed(r.Context(), host)
		writeReturn(w, failure(msg))
		return
	}
	if uri != pathLog {
		if _, ok := e.route(uri); !ok {
			writeReturn(w, failure(msgURINotFound(uri)))
			return
		}
	}
	var body []byte
	if uri != pathBeat { // the beat body ("" in 2.x, none in 3.3+) is ignored
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
		if tooLong := (*http.MaxBytesError)(nil); errors.As(err, &tooLong) {
			tooLarge(w)
			return
		}
		if err != nil {
			writeReturn(w, failure(msgRequestError(err)))
			return
		}
		body = b
	}
	if mainHint && e.learnsFromRequests() && decodes(uri, body) {
		e.wire.learn(dialectMain, whyMainRequest)
	}
	if uri == pathLog {
		e.serveLog(w, body)
		return
	}
	handle, _ := e.route(uri)
	writeReturn(w, handle(body))
}

// authorize checks the access token and, when the admin names the group
// (the main dialect's XXL-JOB-APPNAME), that it names ours. It returns the
// refusal, or "" to go on, and whether the request looks like the main
// admin's (it names a group or calls /trigger). ServeHTTP learns the main
// dialect from such a request only once its body decoded, and only when a
// token is configured (learnsFromRequests): a stranger must not change how
// the executor answers its admin.
func (e *Executor) authorize(h http.Header, uri string) (msg string, mainHint bool) {
	appname, named := h[http.CanonicalHeaderKey(headerAppName)]
	got := ""
	if named {
		got = appname[0]
	}
	token := h.Get(headerAccessToken)
	if e.wire.get() == dialectMain {
		// The main executor refuses a blank token or group outright.
		if token == "" || got == "" {
			return msgMainAuthEmpty, false
		}
		if !e.tokenOK(token) || got != e.cfg.AppName {
			return msgMainAuthInvalid, false
		}
		return "", false
	}
	if !e.tokenOK(token) {
		return msgTokenWrong, false
	}
	if named && got != e.cfg.AppName {
		return msgMainAuthInvalid, false
	}
	return "", named || uri == pathTrigger
}

// learnsFromRequests reports whether an admin's call may teach the
// dialect: only in auto mode, not yet main, and only with a token, so that
// the call proved it comes from the admin. An open executor (no token)
// learns from the admin's answers alone; the main admin needs a token
// anyway.
func (e *Executor) learnsFromRequests() bool {
	return e.wire.auto && e.cfg.AccessToken != "" && e.wire.get() != dialectMain
}

// decodes reports whether body is a well-formed request for uri; a broken
// body teaches nothing.
func decodes(uri string, body []byte) bool {
	var err error
	switch uri {
	case pathRun, pathTrigger:
		_, err = decodeTrigger(body)
	case pathIdleBeat, pathKill:
		_, err = decodeJobID(body)
	case pathLog:
		_, err = decodeLogParam(body)
	}
	return err == nil
}

// tokenOK compares in constant time. An empty configured token disables the
// check, as in Java (the main dialect requires one: see New).
func (e *Executor) tokenOK(got string) bool {
	want := e.cfg.AccessToken
	return want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// beat answers FAILOVER routing. From the moment Shutdown starts it fails,
// as a Java executor's closed port does, so the admin picks another address
// instead of one that would refuse the trigger.
func (e *Executor) beat([]byte) returnT {
	if e.draining.Load() {
		return failure(msgDraining)
	}
	return e.wire.get().ok()
}

// idleBeat answers BUSYOVER routing: beat's answer (a failure while
// draining), or a failure while the job runs.
func (e *Executor) idleBeat(body []byte) returnT {
	p, err := decodeJobID(body)
	if err != nil {
		return failure(msgRequestError(err))
	}
	if rt := e.beat(nil); rt.Code != CodeSuccess || !e.runner.busy(p.JobID) {
		return rt
	}
	return failure(msgBusy)
}

func (e *Executor) run(body []byte) returnT {
	p, err := decodeTrigger(body)
	if err != nil {
		return failure(msgRequestError(err))
	}
	d := e.wire.get()
	rt := e.runner.trigger(p, d)
	if rt.Code != CodeSuccess {
		e.log.Warn("trigger refused", "job_id", p.JobID, "log_id", p.LogID,
			"handler", clip(p.ExecutorHandler, maxLogField), "msg", rt.Msg) // rt.Msg echoes at most maxEcho
		return rt
	}
	return d.ok()
}

func (e *Executor) kill(body []byte) returnT {
	p, err := decodeJobID(body)
	if err != nil {
		return failure(msgRequestError(err))
	}
	d := e.wire.get()
	if !e.runner.kill(p.JobID) {
		return d.okMsg(msgAlreadyKilled)
	}
	e.log.Info("job killed by the admin", "job_id", p.JobID)
	return d.ok()
}

// tooLarge answers a body over maxRequestBody as the Java executor does:
// Netty's HttpObjectAggregator, in front of its handler, sends a bare 413
// with no body and closes the connection, so the admin logs "StatusCode(413)
// invalid" for the trigger. Go's server closes the connection too once
// MaxBytesReader stopped reading.
func tooLarge(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
}
