package delay

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// reconcile publishes again, since a queue cannot be asked whether it holds
// a task: first the PENDING tasks whose publish was never confirmed and
// whose row last changed more than RepublishAfter ago (registered or
// rescheduled while the broker was unreachable, or their confirm was
// lost); then, only while this dispatcher keeps up (fewer than
// keepUpDepth messages wait in the ready queue, nothing held has been due
// for a second), those overdue by more than
// RepublishAfter and last published longer ago than that (their message
// was purged or lost). When the dispatchers are behind, overdue tasks are
// most likely waiting in the ready queue, and publishing them again would
// double the backlog. One executor's reconciler at a time does this (the
// others skip the tick): two publishing the same tasks at once would make
// every one of them a duplicate. The duplicates left are dropped at the
// claim and counted (RabbitMQStats.Duplicates).
// reconcileTurn is always yes: each executor publishes again what it
// finds unconfirmed (a queue cannot be asked what it holds, and the claim
// drops the duplicates).
func (t *RabbitMQTimer) reconcileTurn(context.Context, time.Duration) (bool, error) { return true, nil }

func (t *RabbitMQTimer) reconcile(ctx context.Context, db *sqlx.DB, now time.Time, _ time.Duration) (int64, error) {
	if err := t.pub.Err(); err != nil {
		return 0, fmt.Errorf("rabbitmq timer: %w (new and rescheduled tasks wait in the table)", err)
	}
	release, ok, err := t.store.reconcileLock(ctx, db, t.cfg.Prefix)
	if err != nil || !ok {
		return 0, err
	}
	defer release()
	cutoff := now.Add(-t.cfg.RepublishAfter)
	n, err := t.republish(ctx, db, selectUnpublished, cutoff)
	if err != nil || !t.keepingUp(now) {
		return n, err
	}
	m, err := t.republish(ctx, db, selectOverdue, cutoff)
	return n + m, err
}

// keepUpDepth: a ready queue holding fewer messages is read as in flight
// (messages dead-lettered a moment ago), not as a backlog.
const keepUpDepth = 1000

// keepingUp: this process consumes, the ready queue holds fewer than
// keepUpDepth messages and no held message has been due for a second.
func (t *RabbitMQTimer) keepingUp(now time.Time) bool {
	t.consMu.Lock()
	consuming := t.cons != nil
	t.consMu.Unlock()
	if !consuming || t.held.overdue(now) > time.Second {
		return false
	}
	depth, err := t.readyDepth()
	return err == nil && depth < keepUpDepth
}

// republish pages query's rows and publishes them, recording published_at
// for those confirmed before the next page.
func (t *RabbitMQTimer) republish(ctx context.Context, db *sqlx.DB, query string, cutoff time.Time) (int64, error) {
	const page = 1000
	after := republishRow{At: time.Unix(0, 0)}
	var total int64
	for {
		rows, err := t.store.republishPage(ctx, db, query, cutoff, after, page)
		if err != nil || len(rows) == 0 {
			return total, err
		}
		entries := make([]timerEntry, len(rows))
		for i, r := range rows {
			entries[i] = r.timerEntry
		}
		confirmed, perr := t.publish(ctx, entries)
		total += int64(len(confirmed))
		t.republished.Add(int64(len(confirmed)))
		if err := t.store.markPublished(ctx, db, confirmed); err != nil {
			return total, err
		}
		if perr != nil {
			return total, perr
		}
		if len(rows) < page {
			return total, nil
		}
		after = rows[len(rows)-1]
	}
}
