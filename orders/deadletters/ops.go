package deadletters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders/oplist"
)

// Dead-letter statuses (order_dead_letter.status).
const (
	// Waiting: the close is retried at next_retry_at, by the close
	// sweep and by deadLetterRetryJob.
	Waiting = "waiting"
	// Parked: nobody retries it until an operator requeues it
	// (maximum attempts reached, or the order is gone).
	Parked = "parked"
	// Resolved: the order was closed, or needed no close any more;
	// the row stays for the record.
	Resolved = "resolved"
)

// StageClose is the stage of dead letters written by the close path.
const StageClose = "close"

// ErrNotFound: no dead letter for that order and stage.
var ErrNotFound = errors.New("orders: dead letter not found")

// ErrResolved: a resolved dead letter cannot be requeued.
var ErrResolved = errors.New("orders: dead letter is resolved; nothing to requeue")

// Letter is one row of order_dead_letter: an order whose close (or,
// for other stages, another step) failed.
//
// Times are the database session's wall clock (the zone of create_time, see
// the package doc), not UTC: JSON renders them without a zone, e.g.
// "2026-11-30T10:30:00.000".
type Letter struct {
	ID      int64  `db:"id"`
	OrderNo string `db:"order_no"`
	// OrderTable is the order table the close found the order in
	// (migration 0138); empty on letters written before, and on letters
	// of other stages.
	OrderTable string `db:"order_table"`
	Stage      string `db:"stage"`
	// Status is Waiting, Parked or Resolved.
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

type letterJSON struct {
	ID           int64  `json:"id"`
	OrderNo      string `json:"orderNo"`
	OrderTable   string `json:"orderTable,omitempty"`
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
func (d Letter) MarshalJSON() ([]byte, error) {
	return json.Marshal(letterJSON{ID: d.ID, OrderNo: d.OrderNo, OrderTable: d.OrderTable, Stage: d.Stage, Status: d.Status,
		StatusReason: d.StatusReason, LastError: d.LastError, Attempts: d.Attempts,
		NextRetryAt: d.NextRetryAt.Format(oplist.WallTimeLayout), CreatedAt: d.CreatedAt.Format(oplist.WallTimeLayout),
		UpdatedAt: d.UpdatedAt.Format(oplist.WallTimeLayout)})
}

// UnmarshalJSON reads what MarshalJSON writes (for clients and tests).
func (d *Letter) UnmarshalJSON(b []byte) error {
	var j letterJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = Letter{ID: j.ID, OrderNo: j.OrderNo, OrderTable: j.OrderTable, Stage: j.Stage, Status: j.Status, StatusReason: j.StatusReason,
		LastError: j.LastError, Attempts: j.Attempts}
	for _, f := range []struct {
		s   string
		dst *time.Time
	}{{j.NextRetryAt, &d.NextRetryAt}, {j.CreatedAt, &d.CreatedAt}, {j.UpdatedAt, &d.UpdatedAt}} {
		if f.s == "" {
			continue
		}
		t, err := time.Parse(oplist.WallTimeLayout, f.s)
		if err != nil {
			return fmt.Errorf("dead letter time %q: %w", f.s, err)
		}
		*f.dst = t
	}
	return nil
}

// Filter selects letters to list.
type Filter struct {
	// Status: Waiting, Parked, Resolved or ""
	// for all.
	Status string
	// Stage: e.g. StageClose; "" for all.
	Stage string
	// Limit is the most letters returned, 1-1000. Default 50.
	Limit int
	// BeforeID pages: only letters with a smaller id (0: from the newest).
	BeforeID int64
}

// Listing is a page of letters newest first, and the BeforeID of the
// next page (0 when this is the last): what the CLI's -json and the API's
// list print.
type Listing struct {
	DeadLetters []Letter `json:"deadLetters"`
	NextBefore  int64    `json:"nextBefore"`
}

// ValidStatus reports whether s is a dead-letter status.
func ValidStatus(s string) bool {
	return s == Waiting || s == Parked || s == Resolved
}

// Ops is the operator's view of order_dead_letter: list, inspect,
// requeue. It needs only the database (no Redis), and is safe for concurrent
// use.
type Ops struct {
	db    *sqlx.DB
	store store
}

// New returns the view over db.
func New(db *sqlx.DB) *Ops { return &Ops{db: db} }

// maxLetterStageLen is stage's width.
const maxLetterStageLen = 32

func checkLetterKey(orderNo, stage string) (string, error) {
	if orderNo == "" || len(orderNo) > oplist.MaxOrderNoLen {
		return "", oplist.Invalid("orderNo", "order number must be 1-%d bytes", oplist.MaxOrderNoLen)
	}
	if stage == "" {
		stage = StageClose
	}
	if len(stage) > maxLetterStageLen {
		return "", oplist.Invalid("stage", "stage must be at most %d bytes", maxLetterStageLen)
	}
	return stage, nil
}

// List returns letters newest first.
func (d *Ops) List(ctx context.Context, f Filter) ([]Letter, error) {
	if err := oplist.CheckStatus(f.Status, Waiting, Parked, Resolved); err != nil {
		return nil, err
	}
	if len(f.Stage) > maxLetterStageLen {
		return nil, oplist.Invalid("stage", "stage must be at most %d bytes", maxLetterStageLen)
	}
	if err := oplist.CheckPage(&f.Limit, f.BeforeID); err != nil {
		return nil, err
	}
	rows, _, err := letterList.List(ctx, d.db, letterParams{Status: f.Status, Stage: f.Stage, BeforeID: f.BeforeID, Limit: f.Limit}, f.Limit)
	return rows, err
}

// Get returns the letter of orderNo for stage ("" means StageClose), or
// ErrNotFound.
func (d *Ops) Get(ctx context.Context, orderNo, stage string) (*Letter, error) {
	stage, err := checkLetterKey(orderNo, stage)
	if err != nil {
		return nil, err
	}
	dl, err := d.store.letter(ctx, d.db, orderNo, stage)
	if err != nil {
		return nil, err
	}
	if dl == nil {
		return nil, ErrNotFound
	}
	return dl, nil
}

// Requeue sets a waiting or parked letter back to waiting with next_retry_at
// = now (database clock), so the next deadLetterRetryJob run (and, for
// close letters, the next close sweep) retries it. attempts is kept: a
// requeued letter that reached the maximum gets one more try and is parked
// again if that fails. Returns the letter as it is now; a resolved letter
// returns ErrResolved with the letter, an unknown one
// ErrNotFound. Requeueing a waiting letter twice is harmless.
func (d *Ops) Requeue(ctx context.Context, orderNo, stage string) (*Letter, error) {
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
		return nil, ErrNotFound
	case dl.Status == Resolved:
		return dl, ErrResolved
	}
	return dl, nil
}

// OfOrder returns every letter of orderNo, one per stage.
func (d *Ops) OfOrder(ctx context.Context, orderNo string) ([]Letter, error) {
	return letterList.OfOrder(ctx, d.db, orderNo)
}

// Count counts the letters of one status, stopping at limit (resolved
// letters pile up: a count of them stays a bounded read).
func (d *Ops) Count(ctx context.Context, status string, limit int) (int, error) {
	return d.store.count(ctx, d.db, status, limit)
}
