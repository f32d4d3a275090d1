package deadletters

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// RequeueFilter selects the letters a bulk requeue moves back to waiting.
// Status is required, so the selection is always a range of one status of
// idx_status_updated; the error text only narrows that range.
type RequeueFilter struct {
	// Status is Parked or Waiting (resolved letters
	// cannot be requeued). Required.
	Status string
	// Stage of the letters; "" means StageClose.
	Stage string
	// ErrorLike keeps only letters whose last_error contains it (case as
	// the column's collation compares, so usually not case-sensitive); %
	// and _ are wildcards as in SQL LIKE. "" keeps all. At most 200 bytes.
	ErrorLike string
	// Since keeps only letters last changed (failed, parked) at or after it,
	// on the database session's wall clock like every dead-letter time.
	// Zero keeps all.
	Since time.Time
	// SinceAgo, if positive, sets Since to the database clock minus it
	// (Since must then be zero).
	SinceAgo time.Duration
	// DryRun counts the letters that would be requeued and changes nothing.
	DryRun bool
}

// RequeueResult is what a bulk requeue did.
type RequeueResult struct {
	// Matched is how many letters the filter selected.
	Matched int `json:"matched"`
	// Requeued is how many of them were moved to waiting, due now (0 in a
	// dry run); fewer than Matched when some changed meanwhile.
	Requeued int `json:"requeued"`
	// DryRun echoes the filter's DryRun.
	DryRun bool `json:"dryRun"`
	// Since is the resolved lower bound of updated_at ("" for none), in
	// WallTimeLayout.
	Since string `json:"since,omitempty"`
}

// maxErrorLikeLen bounds RequeueFilter.ErrorLike.
const maxErrorLikeLen = 200

// requeuePage is how many letter ids a bulk requeue reads, and then
// requeues, per statement.
const requeuePage = 1000

// RequeueMatching sets every letter the filter selects back to waiting with
// next_retry_at = now (database clock), as Requeue does for one: attempts
// and last_error are kept, status_reason is cleared, and the next
// deadLetterRetryJob run (and, for close letters, the next close sweep)
// retries them. It reads the matching ids first (keyset pages over
// idx_status_updated, never the whole table), then requeues them a thousand
// at a time, each statement repeating the filter, so a letter resolved or
// changed in between is left alone. The CLI (`executor deadletter requeue
// -status ...`) and the API (POST /api/dead-letters/requeue) both call it.
func (d *Ops) RequeueMatching(ctx context.Context, f RequeueFilter) (RequeueResult, error) {
	res := RequeueResult{DryRun: f.DryRun}
	if f.Status != Parked && f.Status != Waiting {
		return res, oplist.Invalid("status", "status %q: a bulk requeue needs status parked or waiting", f.Status)
	}
	if f.Stage == "" {
		f.Stage = StageClose
	}
	if len(f.Stage) > maxLetterStageLen {
		return res, oplist.Invalid("stage", "stage must be at most %d bytes", maxLetterStageLen)
	}
	if len(f.ErrorLike) > maxErrorLikeLen {
		return res, oplist.Invalid("errorLike", "error text must be at most %d bytes", maxErrorLikeLen)
	}
	switch {
	case f.SinceAgo < 0:
		return res, oplist.Invalid("since", "since %v is negative", f.SinceAgo)
	case f.SinceAgo > 0 && !f.Since.IsZero():
		return res, oplist.Invalid("since", "give a time or a duration ago, not both")
	case f.SinceAgo > 0:
		now, err := sqlexec.Now(ctx, d.db)
		if err != nil {
			return res, err
		}
		f.Since = now.Add(-f.SinceAgo)
	}
	if f.Since.IsZero() {
		f.Since = sqlexec.Earliest
	} else {
		res.Since = f.Since.Format(oplist.WallTimeLayout)
	}

	var ids []int64
	after := letterKey{UpdatedAt: sqlexec.Earliest, ID: -1}
	for {
		rows, err := d.store.matchLetters(ctx, d.db, f, after, requeuePage)
		if err != nil {
			return res, err
		}
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		if len(rows) < requeuePage {
			break
		}
		after = rows[len(rows)-1]
	}
	res.Matched = len(ids)
	if f.DryRun {
		return res, nil
	}
	slices.Sort(ids)
	for chunk := range slices.Chunk(ids, requeuePage) {
		n, err := d.store.requeueLetters(ctx, d.db, f, chunk)
		if err != nil {
			return res, err
		}
		res.Requeued += int(n)
	}
	return res, nil
}

// MaxSinceDays is how far back a since duration may reach (100 years).
const MaxSinceDays = 36524

// ParseSince reads a -since / since= value: a wall-clock time of the
// database session ("2026-12-01 10:00:00", "2026-12-01T10:00", "2026-12-01")
// or a duration back from now ("90m", "6h", "7d"). It returns the time or
// the duration; the other is zero.
func ParseSince(s string) (time.Time, time.Duration, error) {
	return ParseTimeOrAgo("since", s)
}

// ParseTimeOrAgo is ParseSince for the input named field (since, until):
// its errors are *oplist.InvalidInputError naming it.
func ParseTimeOrAgo(field, s string) (time.Time, time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 {
			if n > MaxSinceDays { // also keeps n days from overflowing a Duration
				return time.Time{}, 0, oplist.Invalid(field, "%s %q is more than %d days back", field, s, MaxSinceDays)
			}
			return time.Time{}, time.Duration(n) * 24 * time.Hour, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, 0, oplist.Invalid(field, "%s %q is not a positive duration", field, s)
		}
		if d > MaxSinceDays*24*time.Hour {
			return time.Time{}, 0, oplist.Invalid(field, "%s %q is more than %d days back", field, s, MaxSinceDays)
		}
		return time.Time{}, d, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05.000", "2006-01-02 15:04:05", "2006-01-02 15:04",
		oplist.WallTimeLayout, "2006-01-02T15:04:05", "2006-01-02T15:04", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			if err := oplist.CheckWallTime(field, t); err != nil {
				return time.Time{}, 0, err
			}
			return t, 0, nil
		}
	}
	return time.Time{}, 0, oplist.Invalid(field, "%s %q is neither a time (2006-01-02 15:04:05, 2006-01-02) nor a duration (90m, 6h, 7d)", field, s)
}

// String renders the result as the CLI prints it.
func (r RequeueResult) String() string {
	if r.DryRun {
		return fmt.Sprintf("dry run: %d letter(s) match; none moved", r.Matched)
	}
	return fmt.Sprintf("requeued %d of %d matching letter(s)", r.Requeued, r.Matched)
}
