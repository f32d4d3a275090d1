package delay

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
)

// Timer tells dispatchers when PENDING tasks fall due. It is an index over
// the table by next attempt time, never the truth: an id it hands out is
// claimed in the table (an entry for a task that is no longer PENDING and
// due is dropped by the claim), and the reconciler puts back what it lost.
// NewRedisTimer (a sorted set, the default) and NewRabbitMQTimer (delay-tier
// queues) implement it; a Dispatcher and its Client share one.
type Timer interface {
	// add schedules entries just made PENDING at these times (a committed
	// registration, an attempt's result, recovery, requeue), replacing what
	// the timer holds for them; for an id popped and not yet done, the
	// entry takes over what the pop handed out.
	add(ctx context.Context, entries ...timerEntry) error
	// addMissing puts back entries the timer may lack (popped ids a claim
	// did not take), keeping what it holds for them; it returns how many
	// it added.
	addMissing(ctx context.Context, entries []timerEntry) (int64, error)
	// pop hands out up to n ids due at now (database clock); next is when
	// the earliest one left is due (zero when none is known).
	pop(ctx context.Context, now time.Time, n int) (ids []int64, next time.Time, err error)
	// done ends popped ids: claimed and their attempt's result recorded,
	// or found no longer PENDING (dup: the entry was a duplicate).
	done(ids []int64, dup bool)
	// reconcile brings the timer in line with the table, whose clock reads
	// now; horizon is how far ahead the dispatcher wants tasks scheduled.
	reconcile(ctx context.Context, db *sqlx.DB, now time.Time, horizon time.Duration) (int64, error)
	// reconcileTurn says whether this dispatcher's periodic reconcile
	// should run now; ttl is a little less than the reconcile interval.
	reconcileTurn(ctx context.Context, ttl time.Duration) (bool, error)
	// size is how many entries the timer holds, for operators.
	size(ctx context.Context) (int64, error)
	// start and stop bracket a Dispatcher's run: a timer that pushes due
	// tasks (RabbitMQ) consumes meanwhile and calls wake with the due time
	// of each task it learns of.
	start(ctx context.Context, wake func(due time.Time)) error
	stop(ctx context.Context) error
}

// timerEntry is a task on a timer: its id, its next attempt time and which
// attempt that is (1 for the first; 0 when not known).
type timerEntry struct {
	ID      int64     `db:"id"`
	Time    time.Time `db:"next_attempt_time"`
	Attempt int       `db:"attempt"`
}

// redisTimer is the Redis side: one sorted set per key prefix whose members
// are task ids and whose scores are next attempt times (Unix ms, database
// clock). A PENDING row missing from the set is put back by the reconciler.
type redisTimer struct {
	store store
	rdb   redis.UniversalClient
	key   string
}

// NewRedisTimer returns the timer kept in a Redis sorted set under
// keyPrefix ("delay:" when empty). Executors sharing tasks share the
// prefix. It needs no start: the dispatchers poll it.
func NewRedisTimer(rdb redis.UniversalClient, keyPrefix string) Timer {
	if keyPrefix == "" {
		keyPrefix = DefaultKeyPrefix
	}
	return &redisTimer{rdb: rdb, key: keyPrefix + "timer"}
}

func score(t time.Time) float64 { return float64(t.UnixMilli()) }

// add sets members' scores (ZADD): used after a registration commits and
// after a failed attempt, where the row's time is the truth.
func (tm *redisTimer) add(ctx context.Context, entries ...timerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	zs := make([]redis.Z, len(entries))
	for i, e := range entries {
		zs[i] = redis.Z{Score: score(e.Time), Member: strconv.FormatInt(e.ID, 10)}
	}
	if err := tm.rdb.ZAdd(ctx, tm.key, zs...).Err(); err != nil {
		return fmt.Errorf("timer add %d: %w", len(entries), err)
	}
	return nil
}

// addMissing adds members that are absent (ZADD NX): the reconciler works
// from a snapshot of the table that may be older than a score set since, so
// it never overwrites one.
func (tm *redisTimer) addMissing(ctx context.Context, entries []timerEntry) (int64, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	zs := make([]redis.Z, len(entries))
	for i, e := range entries {
		zs[i] = redis.Z{Score: score(e.Time), Member: strconv.FormatInt(e.ID, 10)}
	}
	n, err := tm.rdb.ZAddNX(ctx, tm.key, zs...).Result()
	if err != nil {
		return 0, fmt.Errorf("timer reconcile %d: %w", len(entries), err)
	}
	return n, nil
}

// popScript removes and returns up to ARGV[2] members whose score is at most
// ARGV[1], in one atomic step, so two dispatchers never get the same member
// and none is lost between the read and the removal (the classic
// ZRANGEBYSCORE-then-ZREM race).
//
//	KEYS[1]  the timer sorted set
//	ARGV[1]  now, Unix ms (database clock)
//	ARGV[2]  most members to pop
//	returns  {next, id...}: next is the lowest score left after the pop
//	         (a string, "-1" when the set is empty), then the popped ids
var popScript = redis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids > 0 then
  redis.call('ZREM', KEYS[1], unpack(ids))
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local nxt = '-1'
if #head > 0 then nxt = head[2] end
table.insert(ids, 1, nxt)
return ids
`)

// pop takes due members. next is when the earliest remaining member is due
// (zero if none).
func (tm *redisTimer) pop(ctx context.Context, now time.Time, n int) (ids []int64, next time.Time, err error) {
	res, err := popScript.Run(ctx, tm.rdb, []string{tm.key}, now.UnixMilli(), n).StringSlice()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("timer pop: %w", err)
	}
	if len(res) == 0 {
		return nil, time.Time{}, fmt.Errorf("timer pop: empty reply")
	}
	if res[0] != "-1" {
		f, err := strconv.ParseFloat(res[0], 64)
		if err == nil {
			next = time.UnixMilli(int64(f)).UTC()
		}
	}
	ids = make([]int64, 0, len(res)-1)
	for _, s := range res[1:] {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			continue // not ours; dropping it is all we can do
		}
		ids = append(ids, id)
	}
	return ids, next, nil
}

// size is the number of members.
func (tm *redisTimer) size(ctx context.Context) (int64, error) {
	return tm.rdb.ZCard(ctx, tm.key).Result()
}

func (tm *redisTimer) done([]int64, bool) {}

// reconcileTurn takes the refill for one interval (SET NX PX ttl on a key
// beside the set), so that of the dispatchers sharing the set one refills
// it per interval instead of each: a pass reads every PENDING task due
// within the horizon and offers it to the set, a cost that grows with the
// task rate times the horizon, and at thousands of tasks a second it was
// paid by every executor. The lease is not released: whoever looks first
// after it lapses takes the next interval, so a dispatcher that stops is
// replaced within one interval. A Redis that lost its data lost the lease
// too, so the refill after a loss is never skipped.
func (tm *redisTimer) reconcileTurn(ctx context.Context, ttl time.Duration) (bool, error) {
	ok, err := tm.rdb.SetNX(ctx, tm.key+":reconcile", "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("timer reconcile lease: %w", err)
	}
	return ok, nil
}

func (tm *redisTimer) start(context.Context, func(time.Time)) error { return nil }

func (tm *redisTimer) stop(context.Context) error { return nil }

// reconcile adds every PENDING task due within horizon that the set lacks
// (ZADD NX: entries present may be newer than this read). After Redis lost
// its data, this is what brings the tasks back.
func (tm *redisTimer) reconcile(ctx context.Context, db *sqlx.DB, now time.Time, horizon time.Duration) (int64, error) {
	const page = 1000
	until := now.Add(horizon)
	after := timerEntry{Time: time.Unix(0, 0)}
	var added int64
	for {
		entries, err := tm.store.timerPage(ctx, db, until, after, page)
		if err != nil {
			return added, err
		}
		n, err := tm.addMissing(ctx, entries)
		added += n
		if err != nil {
			return added, err
		}
		if len(entries) < page {
			return added, nil
		}
		after = entries[len(entries)-1]
	}
}
