package xxljob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// openSpool opens the callback spool and takes in what other spools left
// in the log folder:
//
//   - callbacklogs/*.log, a Java 3.3+ executor's undelivered results (a JSON
//     array per file; logDateTim up to 3.4, logDateTime after): each is
//     journaled, then the file is renamed *.log.imported, so a result moved
//     over from a Java executor reaches the admin once;
//   - callbacklog/xxl-job-callback-*.json, this package's earlier spool
//     format (the same arrays): journaled, then removed;
//   - callbacklog/*.log, a Java 2.x executor's results in Java
//     serialisation, which this package cannot read: left untouched and
//     named in the log, for a person to deliver.
//
// Temporary files a crash left behind are removed.
func (e *Executor) openSpool(ctx context.Context) (*spool, error) {
	sp, torn, err := openSpool(filepath.Join(e.logs.root, spoolDirName))
	if err != nil {
		return nil, err
	}
	if torn > 0 {
		e.log.WarnContext(ctx, "callback spool: unfinished lines skipped (a crash while writing; those results were never reported)", "num_lines", torn)
	}
	imp := spoolImport{sp: sp, e: e, ctx: ctx}
	imp.dir(filepath.Join(e.logs.root, javaSpoolDir), func(name string) bool {
		return strings.HasSuffix(name, ".log")
	}, true)
	imp.dir(filepath.Join(e.logs.root, legacySpoolDir), func(name string) bool {
		return strings.HasPrefix(name, "xxl-job-callback-") && strings.HasSuffix(name, ".json")
	}, false)
	if imp.results > 0 {
		e.log.InfoContext(ctx, "callback results taken over from other spools", "num_results", imp.results, "num_files", imp.files)
	}
	e.reportJava2x(ctx)
	return sp, nil
}

type spoolImport struct {
	sp             *spool
	e              *Executor
	ctx            context.Context
	results, files int
}

// dir imports the files of one folder that match. keep renames an
// imported file aside instead of removing it (another program's file).
func (imp *spoolImport) dir(dir string, match func(string) bool, keep bool) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		imp.e.log.ErrorContext(imp.ctx, "read callback spool folder", "dir", dir, "error", err)
		return
	}
	for _, ent := range entries {
		name := ent.Name()
		path := filepath.Join(dir, name)
		if strings.HasPrefix(name, tempPrefix) && ent.Type().IsRegular() {
			_ = os.Remove(path) // an unfinished write of the earlier spool
			continue
		}
		if !ent.Type().IsRegular() || !match(name) {
			continue
		}
		n, err := imp.file(path)
		if err != nil {
			imp.e.log.ErrorContext(imp.ctx, "callback spool file not imported, set aside", "file", path+unreadableSuffix, "error", err)
			_ = os.Rename(path, path+unreadableSuffix)
			continue
		}
		if keep {
			err = os.Rename(path, path+importedSuffix)
		} else {
			err = os.Remove(path)
		}
		if err != nil { // journaled already: a second import only sends them twice
			imp.e.log.WarnContext(imp.ctx, "imported callback spool file could not be moved; it will be imported again at the next start", "file", path, "error", err)
		}
		imp.results += n
		imp.files++
	}
}

// foreignResult is one result in a Java or earlier spool file.
type foreignResult struct {
	LogID       int64  `json:"logId"`
	LogDateTim  *int64 `json:"logDateTim"`
	LogDateTime *int64 `json:"logDateTime"`
	HandleCode  int    `json:"handleCode"`
	HandleMsg   string `json:"handleMsg"`
}

func (imp *spoolImport) file(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return 0, nil // the Java executor deletes blank files too
	}
	var items []foreignResult
	if err := json.Unmarshal(b, &items); err != nil {
		return 0, fmt.Errorf("not a JSON array of results: %w", err)
	}
	var ps []callbackParam
	for _, it := range items {
		p := callbackParam{LogID: it.LogID, HandleCode: it.HandleCode, HandleMsg: truncateMsg(it.HandleMsg)}
		switch {
		case it.LogDateTime != nil:
			p.LogDateTim = *it.LogDateTime
		case it.LogDateTim != nil:
			p.LogDateTim = *it.LogDateTim
		}
		if p.LogID <= 0 || p.HandleCode <= 0 {
			return 0, fmt.Errorf("invalid result logId=%d handleCode=%d", p.LogID, p.HandleCode)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		if _, err := imp.sp.append(p, false); err != nil {
			return 0, fmt.Errorf("journal: %w", err)
		}
	}
	return len(ps), nil
}

// reportJava2x names the Java 2.x spool files (Java serialisation) found in
// callbacklog/: their results are still owed to the admin.
func (e *Executor) reportJava2x(ctx context.Context) {
	dir := filepath.Join(e.logs.root, legacySpoolDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, ent := range entries {
		if ent.Type().IsRegular() && strings.HasSuffix(ent.Name(), ".log") {
			e.log.WarnContext(ctx, "Java 2.x callback spool file left untouched: its results are in Java serialisation, "+
				"which this executor cannot read; deliver them with a Java 2.x executor on this log path, or mark those runs in the admin",
				"file", filepath.Join(dir, ent.Name()))
		}
	}
}
