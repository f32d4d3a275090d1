package xxljob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"unicode/utf8"
)

// A /log answer carries every line from fromLineNum to the end, as the Java
// executor's does: the admin UI pulls a finished run's log once and stops,
// so a page cut short would hide the rest for good. The answer is streamed
// from the file (never held in memory) up to readLimit bytes of the file;
// past the limit it ends with a note naming the file. The file is read up to
// the size it had when the request came in, so a run still writing does not
// stretch one answer without end.
//
// toLineNum must come before logContent in the JSON (the order the Java
// executor writes), so the file is read twice: a first pass finds the lines
// to send and the last line's number, a second copies them into the answer.

// logSlice is what a /log answer sends of one file.
type logSlice struct {
	path       string
	f          *os.File
	from       int32 // requested fromLineNum
	to         int32 // last line sent; toLineNumPastEnd(last) if none
	start, end int64 // byte range of lines from..to
	lines      int32 // lines in the file up to the snapshot
	cut        bool  // the limit stopped the answer before the end
}

const logChunk = 64 << 10

// scanLog runs the first pass. A final line without its "\n" is a line (as
// Java counts it) unless the file grew meanwhile: then it is most likely an
// entry being written, and the next poll gets it whole.
func scanLog(f *os.File, from int32, limit int64) (logSlice, error) {
	fi, err := f.Stat()
	if err != nil {
		return logSlice{}, err
	}
	size := fi.Size()
	s := logSlice{f: f, from: from}
	first := max(from, 1)
	buf := make([]byte, logChunk)
	var off int64
	line := int32(1)      // number of the line at off
	lineStart := int64(0) // offset of the current line
	s.start, s.end = -1, -1
	for off < size {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if n == 0 && err != nil {
			return s, err
		}
		chunk := buf[:n]
		for {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				break
			}
			lineEnd := off + int64(i) + 1
			if line >= first && !s.cut {
				if s.start < 0 {
					s.start = lineStart
				}
				if lineEnd-s.start > limit && s.end >= 0 {
					s.cut = true // this line would pass the limit: stop before it
				} else {
					s.end, s.to = min(lineEnd, s.start+limit), line
					s.cut = lineEnd-s.start > limit // one line longer than the limit: cut inside it
				}
			}
			line++
			lineStart = lineEnd
			chunk = chunk[i+1:]
			off = lineEnd
		}
		off += int64(len(chunk))
	}
	s.lines = line - 1
	if lineStart < size { // a final line without "\n"
		grown := false
		if fi2, err := f.Stat(); err == nil && fi2.Size() > size {
			grown = true
		}
		if !grown {
			s.lines = line
			if line >= first && !s.cut {
				if s.start < 0 {
					s.start = lineStart
				}
				if size-s.start > limit && s.end >= 0 {
					s.cut = true
				} else {
					s.end, s.to = min(size, s.start+limit), line
					s.cut = size-s.start > limit
				}
			}
		}
	}
	if s.end < 0 {
		s.start, s.end = 0, 0
	}
	return s, nil
}

// serveLog answers /log.
func (e *Executor) serveLog(w http.ResponseWriter, body []byte) {
	p, err := decodeLogParam(body)
	if err != nil {
		writeReturn(w, failure(msgRequestError(err)))
		return
	}
	d := e.wire.get()
	path, err := e.logs.path(p.LogID, p.LogDateTim)
	if err != nil {
		writeReturn(w, failure(msgRequestError(err)))
		return
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Java ends the log here (isEnd, and the admin UI stops polling).
		// A run accepted here that has not begun writing, queued or just
		// started, is "not ended, nothing yet" instead: the admin keeps
		// polling until its file exists.
		res := &logResult{FromLineNum: p.FromLineNum, LogContent: msgLogNotFound, IsEnd: true}
		if e.runner.accepted(p.LogID, p.LogDateTim) {
			res = &logResult{FromLineNum: p.FromLineNum, ToLineNum: d.toLineNumPastEnd(0)}
		}
		rt := d.ok()
		for _, field := range d.logFields() {
			if field == "content" {
				rt.Content = res
			} else {
				rt.Data = res
			}
		}
		writeReturn(w, rt)
		return
	}
	if err != nil {
		writeReturn(w, failure(msgRequestError(err)))
		return
	}
	defer f.Close()
	s, err := scanLog(f, p.FromLineNum, e.cfg.LogReadLimit)
	if err != nil {
		writeReturn(w, failure(msgRequestError(err)))
		return
	}
	s.path = path
	if s.to == 0 {
		s.to = d.toLineNumPastEnd(s.lines)
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(http.StatusOK)
	if err := writeLogAnswer(w, d, s); err != nil {
		e.log.Warn("log answer cut short", "log_id", p.LogID, "error", err)
	}
}

// writeLogAnswer writes the envelope with the slice under each of the
// dialect's fields. A read error after the answer began ends the content
// with a line saying so; the JSON stays valid.
func writeLogAnswer(w io.Writer, d dialect, s logSlice) error {
	bw := &errWriter{w: w}
	bw.str(`{"code":200`)
	if d.v3() {
		bw.str(`,"msg":"` + msgSuccess + `"`)
	}
	var readErr error
	for _, field := range d.logFields() {
		bw.str(`,"` + field + `":{"fromLineNum":` + strconv.Itoa(int(s.from)) +
			`,"toLineNum":` + strconv.Itoa(int(s.to)) + `,"logContent":"`)
		if err := s.copyContent(bw); err != nil {
			readErr = err
			writeJSONString(bw, "\n"+lineReadError+err.Error()+"\n")
		} else if s.cut {
			writeJSONString(bw, s.cutNote())
		}
		bw.str(`","isEnd":false}`)
	}
	bw.str("}")
	return errors.Join(readErr, bw.err)
}

// copyContent streams the slice's bytes as the inside of a JSON string,
// each line ending in "\n" ("\r\n" becomes "\n").
func (s logSlice) copyContent(w *errWriter) error {
	if s.end <= s.start {
		return nil
	}
	esc := jsonEscaper{w: w}
	buf := make([]byte, logChunk)
	last := byte('\n')
	for off := s.start; off < s.end && w.err == nil; {
		n, err := s.f.ReadAt(buf[:min(int64(len(buf)), s.end-off)], off)
		chunk := buf[:n]
		if off+int64(n) < s.end {
			// Never split a rune or a "\r\n": those bytes start the next read.
			chunk = chunk[:n-heldBack(chunk)]
		}
		if len(chunk) == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				err = errors.New("the log file shrank while it was read")
			}
			return err
		}
		esc.write(chunk)
		last = chunk[len(chunk)-1]
		off += int64(len(chunk))
	}
	if last != '\n' {
		w.str(`\n`) // the Java executor ends every line it sends with a line break
	}
	return nil
}

// heldBack is how many bytes at the end of b must wait for the next read: a
// final "\r" (a "\n" may follow) or the start of an incomplete rune.
func heldBack(b []byte) int {
	if len(b) < utf8.UTFMax {
		return 0
	}
	if b[len(b)-1] == '\r' {
		return 1
	}
	for i := len(b) - 1; i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return len(b) - i
			}
			break
		}
	}
	return 0
}

// cutNote is the last line of an answer the limit cut short.
func (s logSlice) cutNote() string {
	return fmt.Sprintf("----------- xxl-job log answer cut at the executor's limit of %d bytes after line %d of %d: "+
		"a running job's page continues with the next poll; the whole log is %s on the executor\n",
		s.end-s.start, s.to, s.lines, s.path)
}

const lineReadError = "----------- xxl-job log read error, the rest of this log is not shown: "

// errWriter remembers the first write error and skips the writes after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) str(s string) { _, _ = io.WriteString(e, s) }

// jsonEscaper writes bytes as the inside of a JSON string: quotes,
// backslashes and control characters escaped, invalid UTF-8 replaced by
// U+FFFD (as encoding/json does), and a "\r" that ends a line dropped.
type jsonEscaper struct {
	w   *errWriter
	out []byte
}

func (j *jsonEscaper) write(b []byte) {
	j.out = j.out[:0]
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\r' && i+1 < len(b) && b[i+1] == '\n':
				// dropped: the line ends with the "\n" that follows
			case c == '"' || c == '\\':
				j.out = append(j.out, '\\', c)
			case c == '\n':
				j.out = append(j.out, '\\', 'n')
			case c == '\t':
				j.out = append(j.out, '\\', 't')
			case c == '\r':
				j.out = append(j.out, '\\', 'r')
			case c < 0x20:
				j.out = append(j.out, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
			default:
				j.out = append(j.out, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			j.out = append(j.out, `\ufffd`...)
		case r == '\u2028' || r == '\u2029': // valid JSON, but not in JavaScript source
			j.out = append(j.out, `\u202`...)
			j.out = append(j.out, hexDigit[r&0xf])
		default:
			j.out = append(j.out, b[i:i+size]...)
		}
		i += size
	}
	_, _ = j.w.Write(j.out)
}

const hexDigit = "0123456789abcdef"

func writeJSONString(w *errWriter, s string) {
	j := jsonEscaper{w: w}
	j.write([]byte(s))
}
