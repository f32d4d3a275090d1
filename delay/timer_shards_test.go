package delay

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
)

// redisTimerOf is the Redis timer of n shards under prefix.
func redisTimerOf(t *testing.T, rdb redis.UniversalClient, prefix string, n int) *redisTimer {
	t.Helper()
	tm, err := newRedisTimer(rdb, RedisTimerConfig{KeyPrefix: prefix, Shards: n})
	require.NoError(t, err)
	return tm
}

// entriesAt are ids from..to-1, each due at at.
func entriesAt(from, to int64, at time.Time) []timerEntry {
	var out []timerEntry
	for id := from; id < to; id++ {
		out = append(out, timerEntry{ID: id, Time: at})
	}
	return out
}

// members reads a key's members and scores.
func members(t *testing.T, rdb redis.UniversalClient, key string) map[int64]int64 {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	require.NoError(t, err)
	out := map[int64]int64{}
	for _, z := range zs {
		id, err := strconv.ParseInt(z.Member.(string), 10, 64)
		require.NoError(t, err)
		out[id] = int64(z.Score)
	}
	return out
}

// One shard (the default) is the single key of before: same name, same
// lease, no shard keys.
func TestTimerOneShardKeepsTheSingleKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, n := range []int{0, 1} {
		tm := redisTimerOf(t, b.rdb, b.prefix, n)
		require.Equal(t, []string{b.prefix + "timer"}, tm.keys)
		require.NoError(t, tm.add(ctx, entriesAt(1, 11, time.Now())...))
	}
	require.Len(t, members(t, b.rdb, b.prefix+"timer"), 10)
	keys, err := b.rdb.Keys(ctx, b.prefix+"*").Result()
	require.NoError(t, err)
	require.Equal(t, []string{b.prefix + "timer"}, keys)
}

// Several shards: every task lands in the shard of its id's hash, the
// shards fill about evenly, and pops take every due id exactly once
// whatever the limit, from all shards, leaving the ones not due.
func TestTimerShardsSpreadAndPopEveryShard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tm := redisTimerOf(t, b.rdb, b.prefix, 4)
	now := time.Now().UTC()
	require.NoError(t, tm.add(ctx, entriesAt(1, 401, now.Add(-time.Second))...))
	later := now.Add(time.Hour).Truncate(time.Millisecond)
	require.NoError(t, tm.add(ctx, entriesAt(1000, 1010, later)...))
	for i := range 4 {
		m := members(t, b.rdb, fmt.Sprintf("%stimer:{%d}", b.prefix, i))
		require.InDelta(t, 102, len(m), 30, "shard %d holds about a quarter", i)
		for id := range m {
			require.Equal(t, i, shardOf(id, 4), "id %d in its hash's shard", id)
		}
	}
	n, err := tm.size(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 410, n)

	seen := map[int64]bool{}
	for _, limit := range []int{1, 3, 50, 1000} { // fewer than, about and more than the shards
		ids, next, err := tm.pop(ctx, now, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(ids), limit)
		for _, id := range ids {
			require.False(t, seen[id], "id %d popped twice", id)
			seen[id] = true
		}
		if len(seen) < 400 {
			require.Len(t, ids, limit, "more is due: a full pop")
			require.False(t, next.After(now), "more is due: next is now")
		} else {
			require.Equal(t, later, next, "the earliest entry not due")
		}
	}
	require.Len(t, seen, 400)
	ids, next, err := tm.pop(ctx, now, 10)
	require.NoError(t, err)
	require.Empty(t, ids)
	require.Equal(t, later, next)
}

// A timer of several shards whose prefix holds a hash tag, or a count out
// of range, is refused.
func TestTimerShardsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		prefix string
		n      int
		msg    string
	}{
		{"{delay}:", 4, `delay: key prefix "{delay}:" holds '{' or '}': its hash tag would put all 4 timer shards in one Redis Cluster slot`},
		{"delay:", 65, "delay: timer shards 65 is outside 1..64"},
		{"delay:", -1, "delay: timer shards -1 is outside 1..64"},
	} {
		_, err := NewRedisTimer(b.rdb, RedisTimerConfig{KeyPrefix: tc.prefix, Shards: tc.n})
		require.EqualError(t, err, tc.msg)
		_, err = NewClient(dbtest.Unconnected(t), b.rdb, ClientConfig{KeyPrefix: tc.prefix, TimerShards: tc.n})
		require.EqualError(t, err, tc.msg)
	}
	_, err := NewRedisTimer(b.rdb, RedisTimerConfig{KeyPrefix: "{delay}:"})
	require.NoError(t, err, "one shard: a tag in the prefix is the operator's business")
}

// Changing the count loses nothing: the refill moves what the keys of the
// old count hold into the new shards (an entry already there keeps the
// earlier time), empties the old keys, and leaves entries in keys the new
// count shares alone. Back to one shard, the same.
func TestTimerShardCountChangeMovesEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	single := redisTimerOf(t, b.rdb, b.prefix, 1)
	eight := redisTimerOf(t, b.rdb, b.prefix, 8)
	require.NoError(t, single.add(ctx, entriesAt(1, 101, now)...))
	require.NoError(t, eight.add(ctx, entriesAt(101, 301, now.Add(time.Minute))...))
	three := redisTimerOf(t, b.rdb, b.prefix, 3)
	// Id 1 is also on the new timer, later: the earlier time wins.
	require.NoError(t, three.add(ctx, timerEntry{ID: 1, Time: now.Add(time.Hour)}))
	// Id 150 is in shard {0..2} of the eight: it stays where it is.
	stay := int64(0)
	for id := int64(101); id < 301; id++ {
		if shardOf(id, 8) < 3 && shardOf(id, 3) != shardOf(id, 8) {
			stay = id
			break
		}
	}
	require.NotZero(t, stay)

	moved, err := three.reconcile(ctx, b.db.DB, now, time.Minute) // the table is empty: only the move
	require.NoError(t, err)
	all := map[int64]int64{}
	for _, k := range three.keys {
		for id, s := range members(t, b.rdb, k) {
			_, dup := all[id]
			require.False(t, dup, "id %d in two shards", id)
			all[id] = s
		}
	}
	require.Len(t, all, 300, "every entry on the new timer")
	require.Equal(t, now.UnixMilli(), all[1], "the earlier time kept")
	require.Equal(t, now.Add(time.Minute).UnixMilli(), all[stay])
	require.Contains(t, members(t, b.rdb, shardKey(b.prefix, shardOf(stay, 8))), stay, "left in the shared key")
	for _, k := range three.otherKeys() {
		n, err := b.rdb.Exists(ctx, k).Result()
		require.NoError(t, err)
		require.Zero(t, n, "%s emptied", k)
	}
	require.EqualValues(t, 100+200-countIn(101, 301, func(id int64) bool { return shardOf(id, 8) < 3 }), moved)

	_, err = single.reconcile(ctx, b.db.DB, now, time.Minute)
	require.NoError(t, err)
	require.Len(t, members(t, b.rdb, b.prefix+"timer"), 300, "back to one key")
	for _, k := range single.otherKeys() {
		n, err := b.rdb.Exists(ctx, k).Result()
		require.NoError(t, err)
		require.Zero(t, n, "%s emptied", k)
	}
}

func countIn(from, to int64, f func(int64) bool) int64 {
	var n int64
	for id := from; id < to; id++ {
		if f(id) {
			n++
		}
	}
	return n
}

// An entry rescheduled in an old key between the move's read and its
// removal stays there for the next pass (its new time is not lost).
func TestTimerMoveKeepsAnEntryChangedMeanwhile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	key := b.prefix + "timer"
	require.NoError(t, b.rdb.ZAdd(ctx, key, redis.Z{Score: 1000, Member: "7"}, redis.Z{Score: 2000, Member: "8"}).Err())
	n, err := removeUnchangedScript.Run(ctx, b.rdb, []string{key}, "7", "1000", "8", "1500").Int64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, map[int64]int64{8: 2000}, members(t, b.rdb, key))
}

// A dispatcher on a sharded timer runs every task once and on time, with
// another dispatcher on the same shards.
func TestDispatchersOnShardedTimer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	cfg := b.fastConfig(map[string]HandlerFunc{"rec": rec.handle})
	cfg.TimerShards = 5
	d1, d2 := newDispatcher(t, cfg), newDispatcher(t, cfg)
	ctx := context.Background()
	const n = 60
	for i := range n {
		_, _, err := d1.Client().Register(ctx, Registration{BizUUID: bizN("sh", i), Handler: "rec", Delay: time.Duration(i%6) * 100 * time.Millisecond})
		require.NoError(t, err)
	}
	for i := range 5 {
		require.NotEmpty(t, members(t, b.rdb, shardKey(b.prefix, i)), "shard %d", i)
	}
	require.Empty(t, members(t, b.rdb, b.prefix+"timer"))
	start(t, d1)
	start(t, d2)
	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == n }, waitLong, 10*time.Millisecond)
	for i := range n {
		require.Equal(t, 1, rec.count(bizN("sh", i)), bizN("sh", i))
	}
	s, err := d1.Client().Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, "redis", s.Timer)
	require.EqualValues(t, 0, *s.TimerSize)
}
