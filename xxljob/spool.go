package xxljob

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// spool keeps callback batches that no admin accepted, one JSON file per
// batch (the wire array) in {LogPath}/callbacklog/, so results survive admin
// outages and executor restarts. Files appear atomically: written under a
// temporary name, then hard-linked to a final name that is never reused.
type spool struct {
	dir string
	mu  sync.Mutex // serialises name choice
}

const (
	spoolPrefix = "xxl-job-callback-"
	spoolSuffix = ".json"
	spoolBad    = ".bad"
)

func newSpool(logRoot string) *spool {
	return &spool{dir: filepath.Join(logRoot, "callbacklog")}
}

// write stores one batch and returns the number of spooled files.
func (s *spool) write(batch []callbackParam) (int, error) {
	b, err := json.Marshal(batch)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if err = errors.Join(err, tmp.Close()); err != nil {
		return 0, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	base := spoolPrefix + strconv.FormatInt(time.Now().UnixMilli(), 10)
	for i := -1; i < 1000; i++ {
		name := base + spoolSuffix
		if i >= 0 {
			name = base + "-" + strconv.Itoa(i) + spoolSuffix
		}
		err = os.Link(tmp.Name(), filepath.Join(s.dir, name))
		if err == nil {
			return s.countLocked()
		}
		if !errors.Is(err, fs.ErrExist) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("no free spool file name for %s", base)
}

// list returns the spooled file names, oldest first.
func (s *spool) list() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, spoolPrefix) && strings.HasSuffix(n, spoolSuffix) {
			names = append(names, n)
		}
	}
	// Names embed epoch ms of equal width for centuries: lexical is chronological.
	slices.Sort(names)
	return names, nil
}

func (s *spool) read(name string) ([]callbackParam, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		return nil, err
	}
	var batch []callbackParam
	if err := json.Unmarshal(b, &batch); err != nil {
		return nil, err
	}
	for _, p := range batch {
		if p.LogID <= 0 || p.HandleCode <= 0 {
			return nil, fmt.Errorf("invalid item logId=%d handleCode=%d", p.LogID, p.HandleCode)
		}
	}
	return batch, nil
}

// remove deletes a delivered file and returns the number left.
func (s *spool) remove(name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	return s.countLocked()
}

// setAside renames a corrupt file so it is kept for a human but not retried.
func (s *spool) setAside(name string) {
	p := filepath.Join(s.dir, name)
	_ = os.Rename(p, p+spoolBad)
}

func (s *spool) countLocked() (int, error) {
	names, err := s.list()
	return len(names), err
}
