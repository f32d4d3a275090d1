package xxljobtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Spooled returns the run results waiting in the callback spool of an
// executor whose log path is logPath, by logId (with their handleCode), read
// from the spool's files as a restarted executor reads them: the results
// written to {logPath}/callbackspool/callbacks-*.jsonl not yet acknowledged
// in the matching .ack file. A result also queued in memory counts: every
// result is on disk until an admin accepted it.
func Spooled(logPath string) (map[int64]int, error) {
	dir := filepath.Join(logPath, "callbackspool")
	acked := map[uint64]bool{}
	err := globLines(filepath.Join(dir, "callbacks-*.ack"), func(line string) error {
		n, err := strconv.ParseUint(line, 10, 64)
		acked[n] = true
		return err
	})
	if err != nil {
		return nil, err
	}
	out := map[int64]int{}
	err = globLines(filepath.Join(dir, "callbacks-*.jsonl"), func(line string) error {
		var r struct {
			Seq        uint64          `json:"seq"`
			LogID      int64           `json:"logId"`
			HandleCode int             `json:"handleCode"`
			Start      json.RawMessage `json:"start"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil //nolint:nilerr // a line being written: not a result yet
		}
		if r.Start == nil && !acked[r.Seq] { // a run's start record is no result
			out[r.LogID] = r.HandleCode
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// globLines calls fn with each non-blank line of each file matching
// pattern, in name order, and stops at its first error.
func globLines(pattern string, fn func(string) error) error {
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := lines(p, fn); err != nil {
			return err
		}
	}
	return nil
}

func lines(path string, fn func(string) error) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed meanwhile: all delivered
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			if err := fn(line); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}
