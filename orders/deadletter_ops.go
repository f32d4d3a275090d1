package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Dead-letter statuses (order_dead_letter.status).
const (
	// DeadLetterWaiting: the close is retried at next_retry_at, by the close
	// sweep and by deadLetterRetryJob.
	DeadLetterWaiting = "waiting"
	// DeadLetterParked: nobody retries it until an operator requeues it
	// (maximum attempts reached, or the order is gone).
	DeadLetterParked = "parked"
	// DeadLetterResolved: the order was closed, or needed no close any more;
	// the row stays for the record.
	DeadLetterResolved = "resolved"
)

// StageClose is the stage of dead letters written by the close path.
const StageClose = "close"

// ErrDeadLetterNotFound: no dead letter for that order and stage.
var ErrDeadLetterNotFound = errors.New("orders: dead letter not found")

// ErrDeadLetterResolved: a resolved dead letter cannot be requeued.
var ErrDeadLetterResolved = errors.New("orders: dead letter is resolved; nothing to requeue")

// DeadLetter is one row of order_dead_letter: an order whose close (or,
// for other stages, another step) failed.
//
// Times are the database session's wall clock (the zone of create_time, see
// the package doc), not UTC: JSON renders them without a zone, e.g.
// "2026-11-30T10:30:00.000".
type DeadLetter struct {
	ID      int64  `db:"id"`
	OrderNo string `db:"order_no"`
	Stage   string `db:"stage"`
	// Status is DeadLetterWaiting, DeadLetterParked or DeadLetterResolved.
	Status string `db:"status"`
	// StatusReason says why a letter is parked or resolved (parked after
	// the maximum attempts or because the order is gone, resolved as
	// already paid...), as deadLetterRetryJob recorded it; empty while
	// waiting and when the close sweep itself resolved or parked it.
	StatusReason string    `db:"status_reason"`
	LastError    string    `db:"last_error"`
	Attempts     int       `db:"attempts"`
	NextRetryAt  time.Time `db:"next_retry_at"`
	CreatedAt    time.Time `db:"created_at"`
	UpdatedAt    time.Time `db:"updated_at"`
}

// WallTimeLayout renders DeadLetter times: ISO 8601 without a zone, since
// they are wall-clock values of the database session's zone.
const WallTimeLayout = "2006-01-02T15:04:05.000"

type deadLetterJSON struct {
	ID           int64  `json:"id"`
	OrderNo      string `json:"orderNo"`
	Stage        string `json:"stage"`
	Status       string `json:"status"`
	StatusReason string `json:"statusReason"`
	LastError    string `json:"lastError"`
	Attempts     int    `json:"attempts"`
	NextRetryAt  string `json:"nextRetryAt"`
	CreatedAt    string `json:"createdAt"`
	UpdatedAt    string `json:"updatedAt"`
}

// MarshalJSON renders the letter with camelCase keys and zone-less times.
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	return json.Marshal(deadLetterJSON{ID: d.ID, OrderNo: d.OrderNo, Stage: d.Stage, Status: d.Status,
		StatusReason: d.StatusReason, LastError: d.LastError, Attempts: d.Attempts,
		NextRetryAt: d.NextRetryAt.Format(WallTimeLayout), CreatedAt: d.CreatedAt.Format(WallTimeLayout),
		UpdatedAt: d.UpdatedAt.Format(WallTimeLayout)})
}

// UnmarshalJSON reads what MarshalJSON writes (for clients and tests).
func (d *DeadLetter) UnmarshalJSON(b []byte) error {
	var j deadLetterJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = DeadLetter{ID: j.ID, OrderNo: j.OrderNo, Stage: j.Stage, Status: j.Status, StatusReason: j.StatusReason,
		LastError: j.LastError, Attempts: j.Attempts}
	for _, f := range []struct {
		s   string
		dst *time.Time
	}{{j.NextRetryAt, &d.NextRetryAt}, {j.CreatedAt, &d.CreatedAt}, {j.UpdatedAt, &d.UpdatedAt}} {
		if f.s == "" {
			continue
		}
		t, err := time.Parse(WallTimeLayout, f.s)
		if err != nil {
			return fmt.Errorf("dead letter time %q: %w", f.s, err)
		}
		*f.dst = t
	}
	return nil
}

// DeadLetterFilter selects letters to list.
type DeadLetterFilter struct {
	// Status: DeadLetterWaiting, DeadLetterParked, DeadLetterResolved or ""
	// for all.
	Status string
	// Stage: e.g. StageClose; "" for all.
	Stage string
	// Limit is the most letters returned, 1-1000. Default 50.
	Limit int
	// BeforeID pages: only letters with a smaller id (0: from the newest).
	BeforeID int64
}

// DeadLetterList is a page of letters newest first, and the BeforeID of the
// next page (0 when this is the last): what the CLI's -json and the API's
// list print.
type DeadLetterList struct {
	DeadLetters []DeadLetter `json:"deadLetters"`
	NextBefore  int64        `json:"nextBefore"`
}

// MaxListLimit caps DeadLetterFilter.Limit.
const MaxListLimit = 1000

// InvalidInputError is an operator input that cannot be used; Field names it.
type InvalidInputError struct {
	Field string
	Msg   string
}

func (e *InvalidInputError) Error() string { return e.Msg }

func invalidInput(field, format string, args ...any) error {
	return &InvalidInputError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ValidDeadLetterStatus reports whether s is a dead-letter status.
func ValidDeadLetterStatus(s string) bool {
	return s == DeadLetterWaiting || s == DeadLetterParked || s == DeadLetterResolved
}

// DeadLetters is the operator's view of order_dead_letter: list, inspect,
// requeue. It needs only the database (no Redis), and is safe for concurrent
// use.
type DeadLetters struct {
	db    *sqlx.DB
	store store
}

// NewDeadLetters returns the view over db.
func NewDeadLetters(db *sqlx.DB) *DeadLetters { return &DeadLetters{db: db} }

// maxLetterOrderNoLen is order_no's width; maxLetterStageLen stage's.
const (
	maxLetterOrderNoLen = 64
	maxLetterStageLen   = 32
)

func checkLetterKey(orderNo, stage string) (string, error) {
	if orderNo == "" || len(orderNo) > maxLetterOrderNoLen {
		return "", invalidInput("orderNo", "order number must be 1-%d bytes", maxLetterOrderNoLen)
	}
	if stage == "" {
		stage = StageClose
	}
	if len(stage) > maxLetterStageLen {
		return "", invalidInput("stage", "stage must be at most %d bytes", maxLetterStageLen)
	}
	return stage, nil
}

// List returns letters newest first.
func (d *DeadLetters) List(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	if f.Status != "" && !ValidDeadLetterStatus(f.Status) {
		return nil, invalidInput("status", "status %q is not waiting, parked or resolved", f.Status)
	}
	if len(f.Stage) > maxLetterStageLen {
		return nil, invalidInput("stage", "stage must be at most %d bytes", maxLetterStageLen)
	}
	if err := checkPage(&f.Limit, f.BeforeID); err != nil {
		return nil, err
	}
	return d.store.listLetters(ctx, d.db, f)
}

// Get returns the letter of orderNo for stage ("" means StageClose), or
// ErrDeadLetterNotFound.
func (d *DeadLetters) Get(ctx context.Context, orderNo, stage string) (*DeadLetter, error) {
	stage, err := checkLetterKey(orderNo, stage)
	if err != nil {
		return nil, err
	}
	dl, err := d.store.letter(ctx, d.db, orderNo, stage)
	if err != nil {
		return nil, err
	}
	if dl == nil {
		return nil, ErrDeadLetterNotFound
	}
	return dl, nil
}

// Requeue sets a waiting or parked letter back to waiting with next_retry_at
// = now (database clock), so the next deadLetterRetryJob run (and, for
// close letters, the next close sweep) retries it. attempts is kept: a
// requeued letter that reached the maximum gets one more try and is parked
// again if that fails. Returns the letter as it is now; a resolved letter
// returns ErrDeadLetterResolved with the letter, an unknown one
// ErrDeadLetterNotFound. Requeueing a waiting letter twice is harmless.
func (d *DeadLetters) Requeue(ctx context.Context, orderNo, stage string) (*DeadLetter, error) {
	stage, err := checkLetterKey(orderNo, stage)
	if err != nil {
		return nil, err
	}
	if _, err := d.store.requeueLetter(ctx, d.db, orderNo, stage); err != nil {
		return nil, err
	}
	// Read back whatever happened: 0 rows changed is a missing or resolved
	// letter, or one requeued twice within the same millisecond.
	dl, err := d.store.letter(ctx, d.db, orderNo, stage)
	switch {
	case err != nil:
		return nil, err
	case dl == nil:
		return nil, ErrDeadLetterNotFound
	case dl.Status == DeadLetterResolved:
		return dl, ErrDeadLetterResolved
	}
	return dl, nil
}

// checkPage fills the default page size (50) and checks a list's limit and
// before id.
func checkPage(limit *int, before int64) error {
	if *limit == 0 {
		*limit = 50
	}
	if *limit < 1 || *limit > MaxListLimit {
		return invalidInput("limit", "limit %d is not in 1..%d", *limit, MaxListLimit)
	}
	if before < 0 {
		return invalidInput("before", "before %d is negative", before)
	}
	return nil
}
