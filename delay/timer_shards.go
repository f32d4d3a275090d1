package delay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Redis timer of several shards (RedisTimerConfig.Shards). Each look at
// the timer reads the head of every shard in one pipeline (on a Redis
// Cluster, one round trip to each master at once) and pops only the shards
// that have something due, sharing the look's limit among them; each pop is
// popScript on one key, so a shard is as atomic as the single set was.

// headUnknown marks a shard whose head could not be read.
const headUnknown = -2

// popShards is pop over every shard. ids popped from the shards that
// answered are returned even when others did not (with their error): a
// popped id exists nowhere else but in the caller's hands.
func (tm *redisTimer) popShards(ctx context.Context, now time.Time, n int) ([]int64, time.Time, error) {
	nowMs := now.UnixMilli()
	heads, err := tm.heads(ctx)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	next := int64(-1)
	var due []int
	for i, h := range heads {
		switch {
		case h == headUnknown || h == -1:
		case h <= nowMs:
			due = append(due, i)
		default:
			next = earlier(next, h)
		}
	}
	if len(due) == 0 && len(errs) > 0 && !slices.ContainsFunc(heads, func(h int64) bool { return h != headUnknown }) {
		return nil, time.Time{}, fmt.Errorf("timer pop: %w", errs[0])
	}
	// Serve the due shards from a rotating start, so that when fewer ids
	// are wanted than shards are due, no shard waits behind the others.
	if len(due) > 1 {
		k := int(tm.turn.Add(1) % int64(len(due)))
		due = append(due[k:], due[:k]...)
	}
	var ids []int64
	for len(due) > 0 && len(ids) < n {
		pick := due[:min(len(due), n-len(ids))]
		got, still, nxt, err := tm.popSome(ctx, pick, nowMs, n-len(ids))
		ids = append(ids, got...)
		next = earlier(next, nxt)
		if err != nil {
			errs = append(errs, err)
		}
		due = append(still, due[len(pick):]...)
	}
	if len(due) > 0 {
		next = nowMs // more is due than was asked for: look again at once
	}
	var nextT time.Time
	if next >= 0 {
		nextT = time.UnixMilli(next).UTC()
	}
	if err := errors.Join(errs...); err != nil {
		return ids, nextT, fmt.Errorf("timer pop: %w", err)
	}
	return ids, nextT, nil
}

// earlier is the earlier of two Unix ms times, -1 meaning none.
func earlier(a, b int64) int64 {
	if a < 0 || (b >= 0 && b < a) {
		return b
	}
	return a
}

// heads reads each shard's lowest score (Unix ms; -1 for an empty shard,
// headUnknown for one that did not answer).
func (tm *redisTimer) heads(ctx context.Context) ([]int64, error) {
	pipe := tm.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(tm.keys))
	for i, k := range tm.keys {
		cmds[i] = pipe.ZRangeWithScores(ctx, k, 0, 0)
	}
	_, err := pipe.Exec(ctx)
	heads := make([]int64, len(tm.keys))
	for i, c := range cmds {
		switch zs, cerr := c.Result(); {
		case cerr != nil:
			heads[i] = headUnknown
		case len(zs) == 0:
			heads[i] = -1
		default:
			heads[i] = int64(zs[0].Score)
		}
	}
	return heads, err
}

// popSome pops the shards pick, sharing want among them (each gets at
// least one). It returns the ids, the shards that still have something due,
// and the earliest time among those that do not (-1: none).
func (tm *redisTimer) popSome(ctx context.Context, pick []int, nowMs int64, want int) (ids []int64, still []int, next int64, err error) {
	pipe := tm.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(pick))
	limits := make([]int, len(pick))
	for j, i := range pick {
		limits[j] = want / len(pick)
		if j < want%len(pick) {
			limits[j]++
		}
		cmds[j] = popScript.EvalSha(ctx, pipe, []string{tm.keys[i]}, nowMs, limits[j])
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	next = -1
	var errs []error
	for j, i := range pick {
		c := cmds[j]
		if isNoScript(c.Err()) { // a server that never saw the script: load and run it
			c = popScript.Run(ctx, tm.rdb, []string{tm.keys[i]}, nowMs, limits[j])
		}
		res, cerr := c.StringSlice()
		if cerr != nil {
			errs = append(errs, fmt.Errorf("shard %s: %w", tm.keys[i], cerr))
			continue
		}
		got, nxt, perr := parsePop(res)
		if perr != nil {
			errs = append(errs, fmt.Errorf("shard %s: %w", tm.keys[i], perr))
			continue
		}
		ids = append(ids, got...)
		switch {
		case nxt.IsZero():
		case nxt.UnixMilli() <= nowMs:
			still = append(still, i)
		default:
			next = earlier(next, nxt.UnixMilli())
		}
	}
	return ids, still, next, errors.Join(errs...)
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// otherKeys are the keys in which a timer of another shard count keeps its
// entries: the single key, or shard keys beyond this timer's count. Every
// count's keys are among the single key and {prefix}timer:{0} to
// {prefix}timer:{maxTimerShards-1}, so that is all there is to look at.
func (tm *redisTimer) otherKeys() []string {
	all := []string{tm.prefix + "timer"}
	for i := range maxTimerShards {
		all = append(all, shardKey(tm.prefix, i))
	}
	return slices.DeleteFunc(all, func(k string) bool { return slices.Contains(tm.keys, k) })
}

// migrate moves the entries left in otherKeys (by executors that ran with
// another shard count, or before this one changed) into this timer's
// shards, and returns how many it moved. An entry is first added where it
// belongs now, keeping the earlier time when it is there already (ZADD LT:
// an early entry costs a look that puts it back, a late one a late task),
// and only then removed from the old key, and only if its score there is
// still the one read (removeUnchangedScript): an executor of the old count
// that rescheduled it meanwhile leaves it for the next pass. Entries in
// this timer's own keys stay where they are, whatever shard they would
// fall in now: every shard is popped.
func (tm *redisTimer) migrate(ctx context.Context) (int64, error) {
	keys := tm.otherKeys()
	pipe := tm.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Exists(ctx, k)
	}
	_, err := pipe.Exec(ctx)
	errs := []error{err}
	var moved int64
	for i, c := range cmds {
		if c.Val() == 0 {
			continue
		}
		n, err := tm.moveAll(ctx, keys[i])
		moved += n
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return moved, fmt.Errorf("timer: move entries of another shard count: %w", err)
	}
	return moved, nil
}

// removeUnchangedScript removes members whose score is still the one given.
//
//	KEYS[1]  a timer key of another shard count
//	ARGV     member, score, member, score, ...
//	returns  how many it removed
var removeUnchangedScript = redis.NewScript(`
local n = 0
for i = 1, #ARGV, 2 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) == tonumber(ARGV[i+1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
`)

// moveAll moves key's entries into this timer's shards, 1000 at a time.
func (tm *redisTimer) moveAll(ctx context.Context, key string) (int64, error) {
	var moved int64
	for {
		zs, err := tm.rdb.ZRangeWithScores(ctx, key, 0, 999).Result()
		if err != nil || len(zs) == 0 {
			return moved, err
		}
		entries := make([]timerEntry, 0, len(zs))
		args := make([]any, 0, 2*len(zs))
		for _, z := range zs {
			m, _ := z.Member.(string)
			args = append(args, m, strconv.FormatFloat(z.Score, 'f', -1, 64))
			if id, err := strconv.ParseInt(m, 10, 64); err == nil { // not an id: only removed, as pop drops it
				entries = append(entries, timerEntry{ID: id, Time: time.UnixMilli(int64(z.Score)).UTC()})
			}
		}
		if _, err := tm.zadd(ctx, entries, func(c redis.Cmdable, k string, zs []redis.Z) *redis.IntCmd { return c.ZAddLT(ctx, k, zs...) }); err != nil {
			return moved, err
		}
		n, err := removeUnchangedScript.Run(ctx, tm.rdb, []string{key}, args...).Int64()
		moved += n
		if err != nil || n == 0 { // none unchanged: every one was rescheduled meanwhile; the next pass
			return moved, err
		}
	}
}
