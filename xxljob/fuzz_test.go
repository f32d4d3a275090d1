package xxljob

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Seeds: the doc's bodies and a few broken ones.
var fuzzSeeds = []string{
	`{"jobId":7,"executorHandler":"orderTimeoutCloseJob","executorParams":"","executorBlockStrategy":"SERIAL_EXECUTION","executorTimeout":0,"logId":1021,"logDateTime":1700000000123,"glueType":"BEAN","glueSource":"","glueUpdatetime":1699990000000,"broadcastIndex":0,"broadcastTotal":1}`,
	`{"logDateTim":1700000000123,"logId":1021,"fromLineNum":1}`,
	`{"jobId":1}`, `""`, ``, `null`, `{`, `[]`, `{"logId":-1}`, `{"logId":1,"logDateTim":253402300800000}`,
	`{"jobId":"1"}`, `{"jobId":2147483648}`, `{"executorHandler":"\u003cscript\u003e","logId":9}`,
	`{"logId":1,"fromLineNum":-2147483648}`, `{"logId":9223372036854775807,"logDateTime":0}`,
}

func addSeeds(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
}

// withCaseVariants appends to a JSON object members named like the wire
// fields but spelled otherwise, which must change nothing: the Java
// executor's Gson matches names exactly. nil if body does not end an object.
func withCaseVariants(body []byte) []byte {
	b := bytes.TrimRight(body, " \t\r\n")
	if len(b) == 0 || b[len(b)-1] != '}' {
		return nil
	}
	inner := bytes.TrimRight(b[:len(b)-1], " \t\r\n")
	out := append([]byte{}, inner...)
	if len(inner) > 0 && inner[len(inner)-1] != '{' {
		out = append(out, ',')
	}
	return append(out, `"LogId":77,"JOBID":5,"ExecutorHandler":"x","glueTYPE":"GLUE_SHELL","logdatetim":9,"LogDateTime":9,"FromLineNum":3}`...)
}

// requireSameDecoding checks that body and body withCaseVariants decode
// alike.
func requireSameDecoding[T any](t *testing.T, decode func([]byte) (T, error), body []byte, want T) {
	t.Helper()
	variant := withCaseVariants(body)
	if variant == nil {
		return
	}
	got, err := decode(variant)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("case variants changed the decoding of %q: %+v, %v; want %+v", body, got, err, want)
	}
}

func FuzzDecodeTrigger(f *testing.F) {
	addSeeds(f)
	store, err := newLogStore(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeTrigger(body)
		if err != nil {
			if !strings.HasPrefix(msgRequestError(err), "request error:") {
				t.Fatal("bad message")
			}
			return
		}
		if p.LogID <= 0 || p.BroadcastTotal < 1 || p.LogDateTime < 0 {
			t.Fatalf("accepted invalid trigger %+v", p)
		}
		requireSameDecoding(t, decodeTrigger, body, p)
		path, err := store.path(p.LogID, p.LogDateTime)
		if err != nil {
			t.Fatalf("valid trigger without log path: %v", err)
		}
		if rel, err := filepath.Rel(store.root, path); err != nil || strings.HasPrefix(rel, "..") || filepath.Dir(filepath.Dir(rel)) != "." {
			t.Fatalf("log path %s outside %s", path, store.root)
		}
	})
}

func FuzzDecodeLogParam(f *testing.F) {
	addSeeds(f)
	root := f.TempDir()
	store, err := newLogStore(root)
	if err != nil {
		f.Fatal(err)
	}
	// One real log for the paging code.
	p, _ := store.path(1021, 1700000000123)
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	_ = os.WriteFile(p, []byte("a\r\nb\nc"), 0o644)
	f.Fuzz(func(t *testing.T, body []byte) {
		lp, err := decodeLogParam(body)
		if err != nil {
			return
		}
		requireSameDecoding(t, decodeLogParam, body, lp)
		path, err := store.path(lp.LogID, lp.LogDateTim)
		if err != nil {
			t.Fatalf("valid log param without a path: %v", err)
		}
		fh, err := os.Open(path)
		if err != nil {
			return // no such log
		}
		defer fh.Close()
		s, err := scanLog(fh, lp.FromLineNum, 64<<20)
		if err != nil {
			t.Fatalf("scan %+v: %v", lp, err)
		}
		var buf bytes.Buffer
		if err := writeLogAnswer(&buf, dialect2x, s); err != nil {
			t.Fatalf("answer %+v: %v", lp, err)
		}
		var env struct {
			Code    int       `json:"code"`
			Content logResult `json:"content"`
		}
		if err := json.Unmarshal(buf.Bytes(), &env); err != nil {
			t.Fatalf("answer is not JSON: %v: %s", err, buf.Bytes())
		}
		res := env.Content
		if res.FromLineNum != lp.FromLineNum {
			t.Fatal("fromLineNum not echoed")
		}
		if got, want := strings.Count(res.LogContent, "\n"), int(max(0, res.ToLineNum-max(lp.FromLineNum, 1)+1)); got != want {
			t.Fatalf("content %q does not match lines %d..%d", res.LogContent, lp.FromLineNum, res.ToLineNum)
		}
	})
}

func FuzzDecodeKill(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeJobID(body)
		if err == nil && !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q as %+v", body, p)
		}
		if err == nil {
			requireSameDecoding(t, decodeJobID, body, p)
		}
	})
}

// FuzzServeHTTP checks the envelope rule: whatever comes in, the answer is
// HTTP 200 with a JSON object carrying an integer code.
func FuzzServeHTTP(f *testing.F) {
	for _, s := range fuzzSeeds {
		for _, path := range []string{"/run", "/log", "/kill", "/idleBeat", "/beat", "/x"} {
			f.Add(path, []byte(s))
		}
	}
	e, err := New(Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/a"}, AppName: "fuzz", LogPath: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		if _, err := url.ParseRequestURI(path); err != nil || strings.ContainsAny(path, " #") {
			return // not a request line httptest can build
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body))))
		var rt struct {
			Code *int `json:"code"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &rt) != nil || rt.Code == nil || rec.Body.Bytes()[0] != '{' {
			t.Fatalf("%s %q: answer %d %q", path, body, rec.Code, rec.Body.String())
		}
	})
}

// FuzzExactMembers holds exactMembers' walk over the bytes to
// encoding/json's own reading of an object into a map, which matches names
// exactly and keeps a repeated name's last value.
func FuzzExactMembers(f *testing.F) {
	addSeeds(f)
	for _, s := range []string{
		`{"logId":1,"LogId":2,"logId":3}`, `{ "logId" : [1,{"a":"}"}] , "x":"\"" , "jobId":-1e3 }`,
		`{"log\u0049d":5,"jobId":null,"glueType":"a\\\"b"}`, `{"a":{"logId":9},"logId":{"b":[]}}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	names := fieldNames(&triggerParam{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var want map[string]json.RawMessage
		b := bytes.Trim(body, " \t\r\n")
		if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &want) != nil {
			return
		}
		var got map[string]json.RawMessage
		out := exactMembers(b, names)
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q gave %q: %v", b, out, err)
		}
		for name := range names {
			w, inWant := want[name]
			g, inGot := got[name]
			if inWant != inGot || !bytes.Equal(compact(t, w), compact(t, g)) {
				t.Fatalf("%q: member %s is %q, want %q", b, name, g, w)
			}
		}
		if len(got) > len(names) {
			t.Fatalf("%q gave %q: members not asked for", b, out)
		}
	})
}

func compact(t *testing.T, raw []byte) []byte {
	if raw == nil {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzPlainMembers holds decodeObject, which hands a body plainMembers
// passes to encoding/json as it is, to the same body with its syntax
// checked first and only its exact members kept: the same error text, or
// the same fields.
func FuzzPlainMembers(f *testing.F) {
	addSeeds(f)
	for _, s := range []string{
		`{"logId":1,"LogId":2}`, `{"logId":"x","logId":1}`, `{"logId":1,"LOG\u0049D":2}`, `{"logId":"x","jobId":"y"}`,
		`{"jobId":1,"x":{"LogId":2},"JOBİD":3}`, `{"logId":1,"loglId":2,"LOGİD":3}`, `{"logId":1 "jobId":2}`, `{"a\`,
		`{"jobId":1}x`, `{"glueType":"K","GLUETYPE":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got triggerParam
		gotErr := decodeObject(body, &got)
		var want triggerParam
		wantErr := errNotObject
		b := bytes.Trim(body, " \t\r\n")
		switch {
		case len(b) == 0:
			wantErr = errEmptyBody
		case b[0] != '{':
		default:
			if err := json.Unmarshal(b, &struct{}{}); err != nil {
				wantErr = fmt.Errorf("invalid JSON: %w", err)
			} else if err := json.Unmarshal(exactMembers(b, fieldNames(&want)), &want); err != nil {
				wantErr = fmt.Errorf("invalid JSON: %w", err)
			} else {
				wantErr = nil
			}
		}
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || (wantErr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%q: decoded %+v, %v; want %+v, %v", body, got, gotErr, want, wantErr)
		}
	})
}
