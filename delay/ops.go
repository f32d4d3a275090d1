package delay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that renders as text ("2m0s") in JSON.
type Duration time.Duration

// MarshalJSON renders d as its String.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// String is time.Duration's.
func (d Duration) String() string { return time.Duration(d).String() }

// Stats is the operator's view of the table.
type Stats struct {
	DBTime         time.Time        `json:"dbTime"`         // the database clock when read
	Counts         map[Status]int64 `json:"counts"`         // rows by status (every status present)
	Total          int64            `json:"total"`          // all rows
	DueNow         int64            `json:"dueNow"`         // PENDING and due: the backlog
	OldestDue      *time.Time       `json:"oldestDue"`      // next attempt time of the oldest due task
	OldestDueAge   Duration         `json:"oldestDueAge"`   // how late it is
	StuckRunning   int64            `json:"stuckRunning"`   // RUNNING longer than RunningTimeout
	RunningTimeout Duration         `json:"runningTimeout"` // the limit used
	Timer          string           `json:"timer"`          // redis, rabbitmq, or "" (none: the reconciler schedules)
	TimerSize      *int64           `json:"timerSize"`      // entries on the timer: Redis members, or RabbitMQ messages queued and held (nil when it does not answer)
}

// Duplicate is a value held by more than one row.
type Duplicate struct {
	Value string `db:"value" json:"value"`
	N     int64  `db:"n" json:"n"`
}

// CheckReport is the result of Check. OK is false when a bizUuid or trace
// id is duplicated or a task is stuck RUNNING; FAILED tasks are reported,
// not counted as a problem of the system.
type CheckReport struct {
	OK                bool        `json:"ok"`
	DuplicateBizUUIDs []Duplicate `json:"duplicateBizUuids"`
	DuplicateTraceIDs []Duplicate `json:"duplicateTraceIds"`
	StuckRunning      int64       `json:"stuckRunning"`
	Failed            int64       `json:"failed"`
	DueNow            int64       `json:"dueNow"`
	OldestDueAge      Duration    `json:"oldestDueAge"`
	Problems          []string    `json:"problems"`
}

// ListFilter selects tasks for List. Zero fields do not filter.
type ListFilter struct {
	Status   Status
	Handler  string
	BeforeID int64 // page: ids below this one
	Limit    int   // default 50, at most 1000
}

// List returns tasks newest first.
func (c *Client) List(ctx context.Context, f ListFilter) ([]*Task, error) {
	if f.Status != "" && !f.Status.Valid() {
		return nil, invalid("status", "%q is not one of PENDING, RUNNING, DONE, FAILED, CANCELLED", f.Status)
	}
	if err := asciiFilter("handler", f.Handler); err != nil {
		return nil, err
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	if f.Limit > 1000 {
		return nil, invalid("limit", "%d is above 1000", f.Limit)
	}
	return c.store.list(ctx, c.db, f)
}

// Stats counts tasks by status, the backlog due now and stuck claims.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	s, err := c.store.stats(ctx, c.db, c.runningTimeout)
	if err != nil {
		return nil, err
	}
	switch c.timer.(type) {
	case *redisTimer:
		s.Timer = "redis"
	case *RabbitMQTimer:
		s.Timer = "rabbitmq"
	}
	if c.timer != nil {
		if n, err := c.timer.size(ctx); err == nil {
			s.TimerSize = &n
		}
	}
	return s, nil
}

// Check looks for what must never happen (a bizUuid or trace id held by two
// rows, which the unique keys forbid) and what needs an operator (stuck
// RUNNING, FAILED tasks).
func (c *Client) Check(ctx context.Context) (*CheckReport, error) {
	biz, trace, err := c.store.duplicates(ctx, c.db)
	if err != nil {
		return nil, err
	}
	s, err := c.store.stats(ctx, c.db, c.runningTimeout)
	if err != nil {
		return nil, err
	}
	r := &CheckReport{
		DuplicateBizUUIDs: biz, DuplicateTraceIDs: trace,
		StuckRunning: s.StuckRunning, Failed: s.Counts[StatusFailed],
		DueNow: s.DueNow, OldestDueAge: s.OldestDueAge,
		Problems: []string{},
	}
	if r.DuplicateBizUUIDs == nil {
		r.DuplicateBizUUIDs = []Duplicate{}
	}
	if r.DuplicateTraceIDs == nil {
		r.DuplicateTraceIDs = []Duplicate{}
	}
	if len(biz) > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d bizUuids held by more than one task", len(biz)))
	}
	if len(trace) > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d trace ids held by more than one task", len(trace)))
	}
	if r.StuckRunning > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d tasks RUNNING longer than %s", r.StuckRunning, c.runningTimeout))
	}
	r.OK = len(r.Problems) == 0
	return r, nil
}

// Purge deletes DONE and CANCELLED tasks last changed more than retention
// ago, in batches, and returns how many.
func (c *Client) Purge(ctx context.Context, retention time.Duration) (int64, error) {
	const batch = 1000
	var total int64
	for {
		n, err := c.store.purge(ctx, c.db, retention, batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
