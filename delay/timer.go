package delay

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// timer is the Redis side: one sorted set per key prefix whose members are
// task ids and whose scores are next attempt times (Unix ms, database
// clock). It is an index over PENDING rows, never the truth: a member popped
// for a task that is no longer PENDING and due is dropped by the claim, and
// a PENDING row missing from the set is put back by the reconciler.
type timer struct {
	rdb redis.UniversalClient
	key string
}

func newTimer(rdb redis.UniversalClient, prefix string) *timer {
	return &timer{rdb: rdb, key: prefix + "timer"}
}

func score(t time.Time) float64 { return float64(t.UnixMilli()) }

// add sets members' scores (ZADD): used after a registration commits and
// after a failed attempt, where the row's time is the truth.
func (tm *timer) add(ctx context.Context, entries ...timerEntry) error {
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
func (tm *timer) addMissing(ctx context.Context, entries []timerEntry) (int64, error) {
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
func (tm *timer) pop(ctx context.Context, now time.Time, n int) (ids []int64, next time.Time, err error) {
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

// size is the number of members (for stats and tests).
func (tm *timer) size(ctx context.Context) (int64, error) {
	return tm.rdb.ZCard(ctx, tm.key).Result()
}
