package xxljob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Run logs live in {root}/{yyyy-MM-dd}/{logId}.log, the date being the
// trigger time in the executor's local zone (the admin's /log request carries
// the same time, so both find the same file). Paths are built only from
// validated numbers, never from request strings.

const (
	logDateLayout = "2006-01-02"
	logLineLayout = "2006-01-02 15:04:05.000"
)

type logStore struct {
	root string // absolute, cleaned
}

func newLogStore(root string) (*logStore, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("log path %q: %w", root, err)
	}
	return &logStore{root: filepath.Clean(abs)}, nil
}

// path returns the log file of a trigger.
func (s *logStore) path(logID, logDateMilli int64) (string, error) {
	if err := checkLogRef(logID, logDateMilli, "logDateTime"); err != nil {
		return "", err
	}
	p := filepath.Join(s.root, logDay(logDateMilli), strconv.FormatInt(logID, 10)+".log")
	if !strings.HasPrefix(p, s.root+string(filepath.Separator)) {
		return "", fmt.Errorf("log file path escapes the log directory: %s", p)
	}
	return p, nil
}

// logDay names the date folder of a trigger time (epoch ms).
func logDay(logDateMilli int64) string { return logTime(logDateMilli).Format(logDateLayout) }

// runLog appends entries to one run's log file. The file is opened for each
// entry (as Java does), so a late line from a handler that outlived its run,
// or a callback line written later, needs no shared open file.
type runLog struct {
	path  string
	onErr func(error) // reports the first write failure to the process log

	mu     sync.Mutex
	tee    io.Writer // RunOnce: copy of every entry
	failed bool
}

func (s *logStore) open(logID, logDateMilli int64, onErr func(error)) (*runLog, error) {
	p, err := s.path(logID, logDateMilli)
	if err != nil {
		return nil, err
	}
	return &runLog{path: p, onErr: onErr}, nil
}

// entry writes one entry: "2006-01-02 15:04:05.000 [INFO] msg\n". An entry
// with newlines spans several physical lines.
func (l *runLog) entry(t time.Time, level slog.Level, msg string) {
	if l == nil {
		return
	}
	b := make([]byte, 0, len(logLineLayout)+len(msg)+16)
	b = t.AppendFormat(b, logLineLayout)
	b = append(b, " ["...)
	b = append(b, level.String()...)
	b = append(b, "] "...)
	b = append(b, msg...)
	l.write(append(b, '\n'))
}

func (l *runLog) write(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tee != nil {
		_, _ = l.tee.Write(b)
	}
	err := appendFile(l.path, b)
	if err != nil && !l.failed {
		l.failed = true
		if l.onErr != nil {
			l.onErr(err)
		}
	}
}

func appendFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b) // one write per entry keeps concurrent entries whole
	return errors.Join(err, f.Close())
}

// cleanup deletes the date folders at least days before today's local
// midnight (Java JobLogFileCleanThread). Other folders are left alone.
func (s *logStore) cleanup(now time.Time, days int) (removed int, err error) {
	if days < 3 {
		return 0, nil
	}
	entries, err := os.ReadDir(s.root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	y, m, d := now.Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, now.Location())
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.Contains(e.Name(), "-") {
			continue
		}
		day, perr := time.ParseInLocation(logDateLayout, e.Name(), now.Location())
		if perr != nil || today.Sub(day) < time.Duration(days)*24*time.Hour {
			continue
		}
		if rerr := os.RemoveAll(filepath.Join(s.root, e.Name())); rerr != nil {
			errs = append(errs, rerr)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// runLogHandler is the slog.Handler behind Request.Log: text lines with
// key=value attributes in the run's log file.
type runLogHandler struct {
	rl     *runLog
	prefix string // group prefix, "g1.g2."
	attrs  string // pre-rendered " k=v" of WithAttrs
}

func (h *runLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *runLogHandler) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(r.Message)
	sb.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&sb, h.prefix, a)
		return true
	})
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	h.rl.entry(t, r.Level, sb.String())
	return nil
}

func (h *runLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var sb strings.Builder
	sb.WriteString(h.attrs)
	for _, a := range as {
		appendAttr(&sb, h.prefix, a)
	}
	return &runLogHandler{rl: h.rl, prefix: h.prefix, attrs: sb.String()}
}

func (h *runLogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &runLogHandler{rl: h.rl, prefix: h.prefix + name + ".", attrs: h.attrs}
}

func appendAttr(sb *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			appendAttr(sb, p, ga)
		}
		return
	}
	sb.WriteByte(' ')
	sb.WriteString(prefix)
	sb.WriteString(a.Key)
	sb.WriteByte('=')
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " =\"\t\r\n") {
		v = strconv.Quote(v)
	}
	sb.WriteString(v)
}
