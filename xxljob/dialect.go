package xxljob

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
)

// AdminVersion names the admin generation whose wire dialect the executor
// speaks. The generations differ only at the edges (see doc.go), so one
// executor serves all of them; the version decides those edges.
type AdminVersion string

// Admin generations. The "main" dialect is that of xuxueli/xxl-job's default
// branch after 3.4 (3.5.0-SNAPSHOT), read at commit MainCommit.
const (
	// AdminAuto learns the dialect from the admin's answers and calls and,
	// until it knows, answers in a form every generation accepts.
	AdminAuto AdminVersion = "auto"
	// Admin2x is 2.3.x to 2.5.0: ReturnT envelopes ({code,msg,content}).
	Admin2x AdminVersion = "2.x"
	// Admin33 is 3.3.x: Response envelopes ({code,msg,data}), msg "Success".
	Admin33 AdminVersion = "3.3"
	// Admin34 is 3.4.x: as 3.3, and "repeat" for a repeated logId (3.4.1+).
	Admin34 AdminVersion = "3.4"
	// AdminMain is the branch after 3.4: /trigger, object-shaped callbacks,
	// logDateTime, the XXL-JOB-APPNAME header and a token per executor group.
	AdminMain AdminVersion = "main"
)

// MainCommit is the commit of xuxueli/xxl-job whose executor and admin the
// main dialect was built from.
const MainCommit = "128dd678962b8918b9abf2e82928818b0072ac50"

// ParseAdminVersion parses a configured version. "" means auto and "2.4" is
// accepted for 2.x (the spelling the provisioning key used first).
func ParseAdminVersion(s string) (AdminVersion, error) {
	switch v := AdminVersion(strings.TrimSpace(s)); v {
	case "":
		return AdminAuto, nil
	case "2.4":
		return Admin2x, nil
	case AdminAuto, Admin2x, Admin33, Admin34, AdminMain:
		return v, nil
	}
	return "", fmt.Errorf("admin version %q is not auto, 2.x, 3.3, 3.4 or main", s)
}

// dialect is what the executor currently speaks. dialectUnknown is auto
// before anything was learned.
type dialect uint32

const (
	dialectUnknown dialect = iota
	dialect2x
	dialect33
	dialect34
	dialectMain
)

func (d dialect) String() string {
	return [...]string{"unknown", "2.x", "3.3", "3.4", "main"}[d]
}

// v3 reports the Response envelope ({code,msg,data}, msg "Success").
func (d dialect) v3() bool { return d >= dialect33 }

// wire holds the dialect: fixed when configured, learned in auto mode.
type wire struct {
	auto bool
	cur  atomic.Uint32
	// onChange reports a learned change; called outside any lock.
	onChange func(from, to dialect, why string)
}

func newWire(v AdminVersion) *wire {
	w := &wire{auto: v == AdminAuto}
	switch v {
	case Admin2x:
		w.cur.Store(uint32(dialect2x))
	case Admin33:
		w.cur.Store(uint32(dialect33))
	case Admin34:
		w.cur.Store(uint32(dialect34))
	case AdminMain:
		w.cur.Store(uint32(dialectMain))
	}
	return w
}

func (w *wire) get() dialect { return dialect(w.cur.Load()) }

// learn moves an auto executor to d. Within 3.x only an upgrade to main is
// learned: nothing on the wire tells 3.3 from 3.4.
func (w *wire) learn(d dialect, why string) {
	if !w.auto {
		return
	}
	for {
		old := w.get()
		if old == d || (d == dialect34 && old == dialectMain && why != whyCallbackShape) {
			return
		}
		if w.cur.CompareAndSwap(uint32(old), uint32(d)) {
			if w.onChange != nil {
				w.onChange(old, d, why)
			}
			return
		}
	}
}

const (
	whyEnvelope      = "admin answer envelope"
	whyMainRefusal   = "admin refused without a known group token"
	whyMainRequest   = "admin request with " + headerAppName
	whyCallbackShape = "admin could not parse the callback body"
)

// Messages only the main admin answers with: the group token check.
const (
	msgMainAuthEmpty   = "invalid request, accessToken or appname is empty."
	msgMainAuthInvalid = "invalid request, accessToken or appname invalid."
	// msgAdminParseError starts every 3.4 and main answer to a body the
	// admin could not parse.
	msgAdminParseError = "openapi invoke error"
)

// classify reads what an admin answer tells about its generation: a 2.x
// ReturnT carries "content", a 3.x Response "data" (and "success"), and
// only the main admin refuses with its group-token messages. An answer
// without either key (a bare {"code":200}) tells nothing.
func classify(raw []byte, code int, msg string) (dialect, bool) {
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) != nil {
		return dialectUnknown, false
	}
	_, content := keys["content"]
	_, data := keys["data"]
	_, ok := keys["success"]
	switch {
	case code != CodeSuccess && (msg == msgMainAuthEmpty || msg == msgMainAuthInvalid):
		return dialectMain, true
	case content:
		return dialect2x, true
	case data || ok:
		return dialect34, true
	}
	return dialectUnknown, false
}

// Answers whose shape depends on the dialect.

// ok is the plain success answer: Gson's {"code":200} from a 2.x executor,
// {"code":200,"msg":"Success"} from 3.x (the admin records that msg).
func (d dialect) ok() returnT {
	if d.v3() {
		return returnT{Code: CodeSuccess, Msg: msgSuccess}
	}
	return success()
}

// okMsg is a success carrying a text: 2.x puts it in msg, 3.x in data
// (Response.ofSuccess(data)); unknown sends both.
func (d dialect) okMsg(text string) returnT {
	switch {
	case d == dialectUnknown:
		return returnT{Code: CodeSuccess, Msg: text, Data: text}
	case d.v3():
		return returnT{Code: CodeSuccess, Msg: msgSuccess, Data: text}
	}
	return successMsg(text)
}

// repeatTrigger spells the repeated-logId refusal: "repeate" up to 3.4.0,
// "repeat" from 3.4.1.
func (d dialect) repeatTrigger(logID int64) string {
	if d >= dialect34 {
		return msgRepeatTriggerNew(logID)
	}
	return msgRepeatTrigger(logID)
}

// glueDescs are GlueTypeEnum's descriptions of the GLUE (script) types on
// the branch after 3.4, by name.
var glueDescs = map[string]string{
	"GLUE_GROOVY": "GLUE(Java)", "GLUE_SHELL": "GLUE(Shell)", "GLUE_PYTHON": "GLUE(Python3)", "GLUE_PYTHON2": "GLUE(Python2)",
	"GLUE_NODEJS": "GLUE(Nodejs)", "GLUE_POWERSHELL": "GLUE(PowerShell)", "GLUE_PHP": "GLUE(PHP)",
}

// refuseGlue returns the refusal of a trigger whose glueType is not BEAN;
// nil is a glueType absent or null. Every generation refuses a missing,
// empty or unknown type as Java's GlueTypeEnum.match finds none
// ("glueType[null] is not valid."). A GLUE type, which Java up to 3.4 runs,
// is refused here with that text too; the branch after 3.4 refuses it
// with its own text when glueenabled is off, as it always is here.
func (d dialect) refuseGlue(glueType *string) (string, bool) {
	switch {
	case glueType == nil:
		return msgGlueInvalid("null"), true
	case *glueType == glueTypeBean:
		return "", false
	}
	if desc, ok := glueDescs[*glueType]; ok && d == dialectMain {
		return msgGlueNotSupported(desc), true
	}
	return msgGlueInvalid(*glueType), true
}

// idleReason is the stop reason of a job thread idle too long: "idel" up
// to 2.4.x, "idle" from 2.5.0 (JobThread; both keep "excutor"). The 2.x
// dialect spans 2.3 to 2.5.0 and takes the spelling of most of them.
func (d dialect) idleReason() string {
	if d == dialect2x {
		return reasonIdle2x
	}
	return reasonIdle
}

// logFields names the envelope fields a /log result goes under.
func (d dialect) logFields() []string {
	switch {
	case d == dialectUnknown:
		return []string{"content", "data"}
	case d.v3():
		return []string{"data"}
	}
	return []string{"content"}
}

// toLineNumPastEnd is toLineNum when fromLineNum is past the last line: the
// last line's number (2.x) or 0 (3.3+). Either way from > to.
func (d dialect) toLineNumPastEnd(last int32) int32 {
	if d.v3() {
		return 0
	}
	return last
}
