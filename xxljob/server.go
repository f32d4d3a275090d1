package xxljob

import (
	"crypto/subtle"
	"io"
	"net/http"
)

// ServeHTTP serves the admin's calls: POST /beat, /idleBeat, /run (also
// /trigger, its name after 3.4), /kill and /log. Every answer is HTTP 200
// with a JSON envelope, errors included, as the admin expects. The checks
// run in the Java executor's order: method, empty path, access token (and,
// in the main dialect, the XXL-JOB-APPNAME header), path. The path must
// match exactly, so mount the executor at a server root (http.StripPrefix
// works too).
func (e *Executor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	if msg := e.authorize(r.Header, uri); msg != "" {
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
		if err != nil {
			writeReturn(w, failure(msgRequestError(err)))
			return
		}
		body = b
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
// refusal, or "" to go on. A request that passed, naming a group or calling
// /trigger, teaches an auto executor that its admin speaks the main dialect
// (never one that failed: a stranger must not change how the executor
// answers its admin).
func (e *Executor) authorize(h http.Header, uri string) string {
	appname, named := h[http.CanonicalHeaderKey(headerAppName)]
	got := ""
	if named {
		got = appname[0]
	}
	token := h.Get(headerAccessToken)
	if e.wire.get() == dialectMain {
		// The main executor refuses a blank token or group outright.
		if token == "" || got == "" {
			return msgMainAuthEmpty
		}
		if !e.tokenOK(token) || got != e.cfg.AppName {
			return msgMainAuthInvalid
		}
		return ""
	}
	if !e.tokenOK(token) {
		return msgTokenWrong
	}
	if named && got != e.cfg.AppName {
		return msgMainAuthInvalid
	}
	if named || uri == pathTrigger {
		e.wire.learn(dialectMain, whyMainRequest)
	}
	return ""
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

// idleBeat answers BUSYOVER routing; it fails while draining, like beat.
func (e *Executor) idleBeat(body []byte) returnT {
	p, err := decodeJobID(body)
	if err != nil {
		return failure(msgRequestError(err))
	}
	if e.draining.Load() {
		return failure(msgDraining)
	}
	if e.runner.busy(p.JobID) {
		return failure(msgBusy)
	}
	return e.wire.get().ok()
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
