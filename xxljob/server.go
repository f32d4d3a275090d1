package xxljob

import (
	"crypto/subtle"
	"io"
	"net/http"
)

// ServeHTTP serves the admin's calls: POST /beat, /idleBeat, /run, /kill and
// /log. Every answer is HTTP 200 with a JSON envelope, errors included, as
// the admin expects. The checks run in the Java executor's order: method,
// empty path, access token, path. The path must match exactly, so mount the
// executor at a server root (http.StripPrefix works too).
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
	if !e.tokenOK(r.Header.Get(headerAccessToken)) {
		writeReturn(w, failure(msgTokenWrong))
		return
	}
	handle, ok := e.route(uri)
	if !ok {
		writeReturn(w, failure(msgURINotFound(uri)))
		return
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
	writeReturn(w, handle(body))
}

// tokenOK compares in constant time. An empty configured token disables the
// check, as in Java.
func (e *Executor) tokenOK(got string) bool {
	want := e.cfg.AccessToken
	return want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (e *Executor) beat([]byte) returnT { return success() }

func (e *Executor) idleBeat(body []byte) returnT {
	p, err := decodeJobID(body)
	if err != nil {
		return failure(msgRequestError(err))
	}
	if e.runner.busy(p.JobID) {
		return failure(msgBusy)
	}
	return success()
}

func (e *Executor) run(body []byte) returnT {
	p, err := decodeTrigger(body)
	if err != nil {
		return failure(msgRequestError(err))
	}
	rt := e.runner.trigger(p)
	if rt.Code != CodeSuccess {
		e.log.Warn("trigger refused", "job_id", p.JobID, "log_id", p.LogID, "handler", p.ExecutorHandler, "msg", rt.Msg)
	}
	return rt
}

func (e *Executor) kill(body []byte) returnT {
	p, err := decodeJobID(body)
	if err != nil {
		return failure(msgRequestError(err))
	}
	if !e.runner.kill(p.JobID) {
		return successMsg(msgAlreadyKilled)
	}
	e.log.Info("job killed by the admin", "job_id", p.JobID)
	return success()
}

func (e *Executor) readLog(body []byte) returnT {
	p, err := decodeLogParam(body)
	if err != nil {
		return failure(msgRequestError(err))
	}
	res, err := e.logs.read(p)
	if err != nil {
		return failure(msgRequestError(err))
	}
	rt := success()
	rt.Content, rt.Data = &res, &res // 2.x admins read content, 3.3+ data
	return rt
}
