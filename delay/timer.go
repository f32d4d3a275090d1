package delay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
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
	// the earliest one left is due (zero when none is known). With an
	// error, ids may still hold what was popped (a sharded timer whose
	// shards partly answered): the caller owns them.
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

// redisTimer is the Redis side: sorted sets whose members are task ids and
// whose scores are next attempt times (Unix ms, database clock). With one
// shard it is the single key {prefix}timer; with more, each task lives in
// shard shardOf(id) of the keys {prefix}timer:{i}. A PENDING row missing
// from the sets is put back by the reconciler.
type redisTimer struct {
	store  store
	rdb    redis.UniversalClient
	prefix string
	keys   []string     // the shards, in order
	turn   atomic.Int64 // rotates which due shard a look serves first
}

// RedisTimerConfig configures NewRedisTimer.
type RedisTimerConfig struct {
	// KeyPrefix starts the timer's keys. Default "delay:". Executors
	// sharing tasks share it.
	KeyPrefix string
	// Shards is how many sorted sets the timer is split over, 1 to 64
	// (maxTimerShards). Default 1: the single key {prefix}timer, as before
	// shards existed. With more, shard i is {prefix}timer:{i}, whose hash
	// tag {i} puts each shard in a slot of its own on a Redis Cluster, so
	// the shards spread over its masters; the prefix must then hold no
	// '{' or '}' (a tag of its own would put every shard in one slot).
	// Executors sharing tasks should use the same count; entries left in
	// the keys of another count are moved by the reconciler.
	Shards int
}

// maxTimerShards is the most shards a Redis timer takes.
const maxTimerShards = 64

// NewRedisTimer returns the timer kept in Redis sorted sets (see
// RedisTimerConfig). It needs no start: the dispatchers poll it.
func NewRedisTimer(rdb redis.UniversalClient, cfg RedisTimerConfig) (Timer, error) {
	tm, err := newRedisTimer(rdb, cfg)
	if err != nil {
		return nil, err
	}
	return tm, nil
}

func newRedisTimer(rdb redis.UniversalClient, cfg RedisTimerConfig) (*redisTimer, error) {
	if rdb == nil {
		return nil, errors.New("delay: NewRedisTimer needs Redis")
	}
	prefix := cmp.Or(cfg.KeyPrefix, defaultKeyPrefix)
	n := cmp.Or(cfg.Shards, defaultTimerShards)
	if err := checkTimerShards(prefix, n); err != nil {
		return nil, err
	}
	tm := &redisTimer{rdb: rdb, prefix: prefix}
	if n == 1 {
		tm.keys = []string{prefix + "timer"}
		return tm, nil
	}
	for i := range n {
		tm.keys = append(tm.keys, shardKey(prefix, i))
	}
	return tm, nil
}

// checkTimerShards says why a Redis timer of n shards under prefix is
// refused, or nil.
func checkTimerShards(prefix string, n int) error {
	if n < 1 || n > maxTimerShards {
		return fmt.Errorf("delay: timer shards %d is outside 1..%d", n, maxTimerShards)
	}
	if n > 1 && strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("delay: key prefix %q holds '{' or '}': its hash tag would put all %d timer shards in one Redis Cluster slot", prefix, n)
	}
	return nil
}

// shardKey is shard i's key in a timer of more than one shard.
func shardKey(prefix string, i int) string { return prefix + "timer:{" + strconv.Itoa(i) + "}" }

// shardOf places a task: a fixed hash of its id (SplitMix64's finaliser),
// so that every executor, whatever its version, puts an id in the same
// shard, and consecutive ids spread evenly.
func shardOf(id int64, shards int) int {
	x := uint64(id)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(shards))
}

func score(t time.Time) float64 { return float64(t.UnixMilli()) }

// byShard groups entries by the shard that holds them, as ZADD arguments.
func (tm *redisTimer) byShard(entries []timerEntry) map[string][]redis.Z {
	out := make(map[string][]redis.Z, min(len(entries), len(tm.keys)))
	for _, e := range entries {
		k := tm.keys[shardOf(e.ID, len(tm.keys))]
		out[k] = append(out[k], redis.Z{Score: score(e.Time), Member: strconv.FormatInt(e.ID, 10)})
	}
	return out
}

// zadd runs one ZADD variant per shard the entries fall in (pipelined when
// there are several: a Redis Cluster runs each master's part at once) and
// returns the sum of the counts of the shards that answered.
func (tm *redisTimer) zadd(ctx context.Context, entries []timerEntry, op func(redis.Cmdable, string, []redis.Z) *redis.IntCmd) (int64, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	groups := tm.byShard(entries)
	if len(groups) == 1 {
		for k, zs := range groups {
			return op(tm.rdb, k, zs).Result()
		}
	}
	pipe := tm.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, 0, len(groups))
	for k, zs := range groups {
		cmds = append(cmds, op(pipe, k, zs))
	}
	_, err := pipe.Exec(ctx)
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, err
}

// add sets members' scores (ZADD): used after a registration commits and
// after a failed attempt, where the row's time is the truth.
func (tm *redisTimer) add(ctx context.Context, entries ...timerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	_, err := tm.zadd(ctx, entries, func(c redis.Cmdable, k string, zs []redis.Z) *redis.IntCmd { return c.ZAdd(ctx, k, zs...) })
	if err != nil {
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
	n, err := tm.zadd(ctx, entries, func(c redis.Cmdable, k string, zs []redis.Z) *redis.IntCmd { return c.ZAddNX(ctx, k, zs...) })
	if err != nil {
		return n, fmt.Errorf("timer reconcile %d: %w", len(entries), err)
	}
	return n, nil
}

// popScript removes and returns up to ARGV[2] members whose score is at most
// ARGV[1], in one atomic step, so two dispatchers never get the same member
// and none is lost between the read and the removal (the classic
// ZRANGEBYSCORE-then-ZREM race).
//
//	KEYS[1]  the timer sorted set (one shard)
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
// (zero if none). A timer of several shards pops them all (timer_shards.go).
func (tm *redisTimer) pop(ctx context.Context, now time.Time, n int) (ids []int64, next time.Time, err error) {
	if len(tm.keys) > 1 {
		return tm.popShards(ctx, now, n)
	}
	res, err := popScript.Run(ctx, tm.rdb, tm.keys, now.UnixMilli(), n).StringSlice()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("timer pop: %w", err)
	}
	return parsePop(res)
}

// parsePop reads popScript's reply.
func parsePop(res []string) (ids []int64, next time.Time, err error) {
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

// size is the number of members over all shards.
func (tm *redisTimer) size(ctx context.Context) (int64, error) {
	if len(tm.keys) == 1 {
		return tm.rdb.ZCard(ctx, tm.keys[0]).Result()
	}
	pipe := tm.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(tm.keys))
	for i, k := range tm.keys {
		cmds[i] = pipe.ZCard(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("timer size: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
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
// too, so the refill after a loss is never skipped. The lease key is the
// same whatever the shard count, so executors moving from one count to
// another still take turns.
func (tm *redisTimer) reconcileTurn(ctx context.Context, ttl time.Duration) (bool, error) {
	ok, err := tm.rdb.SetNX(ctx, tm.prefix+"timer:reconcile", "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("timer reconcile lease: %w", err)
	}
	return ok, nil
}

func (tm *redisTimer) start(context.Context, func(time.Time)) error { return nil }

func (tm *redisTimer) stop(context.Context) error { return nil }

// reconcile first moves the entries left in the keys of another shard
// count into this one's (see migrate), then adds every PENDING task due
// within horizon that the sets lack (ZADD NX: entries present may be newer
// than this read). After Redis lost its data, this is what brings the tasks
// back. It returns the entries moved and added.
func (tm *redisTimer) reconcile(ctx context.Context, db *sqlx.DB, now time.Time, horizon time.Duration) (int64, error) {
	added, merr := tm.migrate(ctx) // a key on a master that is down must not hold up the refill
	const page = 1000
	until := now.Add(horizon)
	after := timerEntry{Time: time.Unix(0, 0)}
	for {
		entries, err := tm.store.timerPage(ctx, db, until, after, page)
		if err != nil {
			return added, errors.Join(merr, err)
		}
		n, err := tm.addMissing(ctx, entries)
		added += n
		if err != nil {
			return added, errors.Join(merr, err)
		}
		if len(entries) < page {
			return added, merr
		}
		after = entries[len(entries)-1]
	}
}
