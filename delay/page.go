package delay

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/orderjob/executor/internal/keyset"
)

// TaskQuery selects a page of tasks for an operator's list. A bizUuid or
// trace id finds its one task through its unique key; otherwise each page
// reads a bounded window of index entries: with a status, latest due first
// over idx_status_next_attempt, without one newest id first, and
// the handler is checked on the rows of that window.
type TaskQuery struct {
	Status  Status
	Handler string
	BizUUID string
	TraceID string
	// After continues a list where its previous page's Next left off.
	After keyset.Cursor
	// Limit is the page size, 1-200. Default 50.
	Limit int
}

// TaskPage is one page of a task list.
type TaskPage struct {
	Tasks []*Task
	// Next continues the list; zero when it has no more rows.
	Next keyset.Cursor
	// Examined is how many index entries the page looked at.
	Examined int
	// WindowFull: the page stopped at the search window before it was
	// full; older tasks exist that it did not look at.
	WindowFull bool
}

// Page sizes and the search window of task lists with a handler filter.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
	SearchWindow     = 2000
)

// Page returns one page of tasks (see TaskQuery).
func (c *Client) Page(ctx context.Context, q TaskQuery) (TaskPage, error) {
	var p TaskPage
	if q.Status != "" && !q.Status.Valid() {
		return p, invalid("status", "%q is not one of PENDING, RUNNING, DONE, FAILED, CANCELLED", q.Status)
	}
	if len(q.Handler) > 255 {
		return p, invalid("handler", "is longer than 255 bytes")
	}
	if err := asciiFilter("handler", q.Handler); err != nil {
		return p, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultPageLimit
	}
	if q.Limit < 1 || q.Limit > MaxPageLimit {
		return p, invalid("limit", "%d is not in 1..%d", q.Limit, MaxPageLimit)
	}
	if q.Status == "" && !q.After.At.IsZero() || q.Status != "" && !q.After.IsZero() && q.After.At.IsZero() {
		return p, invalid("after", "%q belongs to another list", q.After)
	}
	if q.BizUUID != "" || q.TraceID != "" {
		return c.exactPage(ctx, q)
	}
	window := q.Limit + 1
	if q.Handler != "" {
		window = SearchWindow
	}
	keys, err := c.store.taskWindow(ctx, c.db, q, window)
	if err != nil {
		return p, err
	}
	p.Examined = len(keys)
	hits := make([]bool, len(keys))
	for i, k := range keys {
		hits[i] = k.Hit
	}
	picked, next, full := keyset.Pick(hits, q.Limit, window)
	ids := make([]int64, len(picked))
	for i, k := range picked {
		ids[i] = keys[k].ID
	}
	if next >= 0 {
		p.Next, p.WindowFull = keys[next].cursor(q.Status != ""), full
	}
	if p.Tasks, err = c.store.tasksByID(ctx, c.db, ids); err != nil {
		return p, err
	}
	order := make(map[int64]int, len(ids))
	for i, id := range ids {
		order[id] = i
	}
	slices.SortFunc(p.Tasks, func(a, b *Task) int { return order[a.ID] - order[b.ID] })
	return p, nil
}

// exactPage is the page of the one task a bizUuid or trace id names (with
// the other filters checked on it).
func (c *Client) exactPage(ctx context.Context, q TaskQuery) (TaskPage, error) {
	var p TaskPage
	var t *Task
	var err error
	if q.BizUUID != "" {
		t, err = c.Get(ctx, q.BizUUID)
	} else {
		t, err = c.GetByTrace(ctx, q.TraceID)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return p, nil
	case err != nil:
		return p, err
	}
	p.Examined = 1
	if (q.TraceID == "" || t.TraceID == q.TraceID) && (q.Status == "" || t.Status == q.Status) &&
		(q.Handler == "" || t.Handler == q.Handler) && q.After.IsZero() {
		p.Tasks = []*Task{t}
	}
	return p, nil
}

// GetByTrace returns the task with the trace id, or ErrNotFound.
func (c *Client) GetByTrace(ctx context.Context, traceID string) (*Task, error) {
	if traceID == "" || len(traceID) > 64 {
		return nil, invalid("traceId", "must be 1-64 characters")
	}
	if err := asciiFilter("traceId", traceID); err != nil {
		return nil, err
	}
	return c.store.getByTrace(ctx, c.db, traceID)
}

// Tallies are the operator's first look at the table: tasks by status, the
// backlog due now, claims RUNNING past the running timeout. Each count
// stops at 10,000 (countCap), so reading them costs the same on any table.
type Tallies struct {
	Counts map[Status]int
	// DueNow are PENDING tasks whose time has come (the backlog); Oldest
	// is how late the oldest of them is.
	DueNow int
	Oldest time.Duration
	// StuckRunning are RUNNING longer than RunningTimeout.
	StuckRunning   int
	RunningTimeout time.Duration
}

// countCap bounds each count of Tallies.
const countCap = 10000

// Tallies counts what Tallies holds.
func (c *Client) Tallies(ctx context.Context) (Tallies, error) {
	t := Tallies{Counts: map[Status]int{}, RunningTimeout: c.runningTimeout}
	now, err := c.store.dbNow(ctx, c.db)
	if err != nil {
		return t, err
	}
	for _, st := range Statuses {
		if t.Counts[st], err = c.store.countStatus(ctx, c.db, st, countCap); err != nil {
			return t, err
		}
	}
	var oldest time.Time
	if t.DueNow, oldest, err = c.store.countDue(ctx, c.db, now, countCap); err != nil {
		return t, err
	}
	if !oldest.IsZero() {
		t.Oldest = max(now.Sub(oldest), 0)
	}
	t.StuckRunning, err = c.store.countStuck(ctx, c.db, now.Add(-c.runningTimeout), countCap)
	return t, err
}

// taskWindowKey is one row of a task list's search window.
type taskWindowKey struct {
	ID  int64     `db:"id"`
	At  time.Time `db:"at"` // next_attempt_time: a status list's order
	Hit bool      `db:"hit"`
}

func (k taskWindowKey) cursor(byStatus bool) keyset.Cursor {
	if byStatus {
		return keyset.Cursor{At: utcWall(k.At), ID: k.ID}
	}
	return keyset.Cursor{ID: k.ID}
}
