package orderlock

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// Config configures a Locker. Zero values take the defaults given.
type Config struct {
	// Client is the Redis deployment the locks live on: a single server, a
	// Sentinel group or a Cluster (redis.NewUniversalClient). Used when Nodes
	// is empty.
	Client redis.UniversalClient
	// Nodes are independent Redis servers for the Redlock algorithm: a key is
	// held when it was set on a majority (len/2+1) within the validity
	// window. When set, Client is not used for locks.
	Nodes []redis.UniversalClient
	// Prefix goes before "order:close:{orderNo}". Default empty.
	Prefix string
	// TTL is each lock's expiry (PX). It must stay well above a page's close
	// transaction: a lease that may have run out is never committed under.
	// Default 10s; at least 10ms.
	TTL time.Duration
	// Timeout bounds one acquire or release call on a node, so a Redis that is
	// down or hanging fails the call fast instead of stalling the run.
	// Default TTL/20, at least 200ms.
	Timeout time.Duration
	// DriftFactor is the share of TTL subtracted from a lease's validity for
	// clock drift between this process and Redis (plus 2ms), as redsync does.
	// Default 0.01.
	DriftFactor float64
	// Observer receives each Acquire's latency and contention. nil: none.
	Observer Observer
}

// Locker takes per-order locks in bulk: one pipelined `SET key token NX PX ttl`
// per key and node, released by a pipelined compare-and-delete. The values and
// scripts are those of redsync, so a redsync mutex on the same key (an order
// service that locks with redsync) and a Locker lease exclude each other
// both ways.
//
// Only single-key commands are used, so pipelines work on a single server,
// behind Sentinel and on a Cluster (go-redis splits a Cluster pipeline by
// slot); no multi-key script can fail with CROSSSLOT.
type Locker struct {
	nodes   []redis.UniversalClient
	quorum  int
	prefix  string
	ttl     time.Duration
	timeout time.Duration
	drift   time.Duration
	rs      *redsync.Redsync
	obs     Observer
}

// DefaultTTL is Config.TTL when zero, and the executor's
// order.close.lockTTL default (config takes it from here).
const DefaultTTL = 10 * time.Second

// New checks cfg and returns a Locker.
func New(cfg Config) (*Locker, error) {
	nodes := cfg.Nodes
	if len(nodes) == 0 {
		if cfg.Client == nil {
			return nil, errors.New("orderlock: locker needs a Redis client or lock nodes")
		}
		nodes = []redis.UniversalClient{cfg.Client}
	}
	for i, n := range nodes {
		if n == nil {
			return nil, fmt.Errorf("orderlock: lock node %d is nil", i)
		}
	}
	ttl := cmp.Or(cfg.TTL, DefaultTTL)
	if ttl < 10*time.Millisecond {
		return nil, fmt.Errorf("orderlock: lock TTL %v is below 10ms", ttl)
	}
	df := cmp.Or(cfg.DriftFactor, 0.01)
	if df < 0 || df >= 0.5 {
		return nil, fmt.Errorf("orderlock: lock drift factor %v out of [0, 0.5)", df)
	}
	pools := make([]redsyncredis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = goredis.NewPool(n)
	}
	return &Locker{
		nodes:   slices.Clone(nodes),
		quorum:  len(nodes)/2 + 1,
		prefix:  cfg.Prefix,
		ttl:     ttl,
		timeout: cmp.Or(cfg.Timeout, max(ttl/20, 200*time.Millisecond)),
		drift:   time.Duration(float64(ttl)*df) + 2*time.Millisecond,
		rs:      redsync.New(pools...),
		obs:     cfg.Observer,
	}, nil
}

// KeyFor returns the lock key of an order: {prefix}order:close:{orderNo}.
// The order service (Pay) and every close path lock the same key, so a
// payment and a close of one order never run at once.
func (l *Locker) KeyFor(orderNo string) string {
	return l.prefix + "order:close:" + orderNo
}

// TTL returns the lock expiry.
func (l *Locker) TTL() time.Duration { return l.ttl }

// Timeout returns the bound of one acquire or release call on a node.
func (l *Locker) Timeout() time.Duration { return l.timeout }

// Redsync returns a redsync instance over the same node(s), for code that
// locks one order with a plain redsync mutex on KeyFor(orderNo).
// One instance per Locker; take a fresh NewMutex per acquisition.
func (l *Locker) Redsync() *redsync.Redsync { return l.rs }

// Lease is the set of order locks one Acquire call obtained, all with the same
// random token and the same validity.
type Lease struct {
	locker *Locker
	token  string
	until  time.Time
	held   map[string]bool // order numbers
	failed map[string]bool // not held because Redis failed, not because taken
	once   sync.Once
	relErr error
}

// Held reports whether the lease holds orderNo's lock.
func (s *Lease) Held(orderNo string) bool { return s != nil && s.held[orderNo] }

// Failed reports whether orderNo's lock could not be taken because Redis is
// unreachable: no quorum of the nodes answered (or they answered too late),
// as opposed to someone else holding it (a quorum answered and a node said
// the key is taken).
func (s *Lease) Failed(orderNo string) bool { return s != nil && s.failed[orderNo] }

// Len returns the number of locks held.
func (s *Lease) Len() int {
	if s == nil {
		return 0
	}
	return len(s.held)
}

// Until returns the end of the lease's validity: acquisition start + TTL -
// drift. After it, another holder may have the keys.
func (s *Lease) Until() time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.until
}

// ValidFor reports whether the lease stays valid for at least d from now.
func (s *Lease) ValidFor(d time.Duration) bool {
	return s != nil && len(s.held) > 0 && time.Now().Add(d).Before(s.until)
}

// Release deletes the held keys whose value is still this lease's token, on
// every node. It is safe to call more than once (later calls return the first
// result) and on a nil lease.
func (s *Lease) Release(ctx context.Context) error {
	if s == nil || len(s.held) == 0 {
		return nil
	}
	s.once.Do(func() {
		nos := make([]string, 0, len(s.held))
		for no := range s.held {
			nos = append(nos, no)
		}
		s.relErr = s.locker.releaseKeys(ctx, s.token, s.locker.keys(nos))
	})
	return s.relErr
}

// Acquire tries once to lock every order in orderNos (duplicates ignored) and
// returns the lease of those it got. Keys held by someone else are simply not
// in the lease. Keys that could not be decided because Redis failed are
// reported by Lease.Failed and the returned error (per-node errors joined);
// the lease is returned in every case and must be released.
func (l *Locker) Acquire(ctx context.Context, orderNos []string) (*Lease, error) {
	token, err := newToken()
	if err != nil {
		return &Lease{locker: l}, fmt.Errorf("lock token: %w", err)
	}
	nos := uniq(orderNos)
	lease := &Lease{locker: l, token: token, held: make(map[string]bool, len(nos))}
	if len(nos) == 0 {
		return lease, nil
	}
	keys := l.keys(nos)

	start := time.Now()
	results := make([][]setResult, len(l.nodes))
	nodeErrs := make([]error, len(l.nodes))
	l.onNodes(func(i int, node redis.UniversalClient) {
		results[i], nodeErrs[i] = l.setNX(ctx, node, keys, token)
	})
	now := time.Now()
	until := start.Add(l.ttl - l.drift)
	inTime := now.Before(until)

	notHeld := l.decide(lease, nos, keys, results, inTime)
	if !inTime {
		nodeErrs = append(nodeErrs, fmt.Errorf("lock answers took %v, beyond the %v validity", now.Sub(start), l.ttl-l.drift))
	}
	lease.until = until
	errs := l.nodeErrors(nodeErrs)
	if len(notHeld) > 0 {
		// Redlock: a key that missed the quorum may still be set on some
		// nodes; delete it (only where it carries our token) everywhere.
		if rerr := l.releaseKeys(ctx, token, notHeld); rerr != nil && len(errs) == 0 && len(lease.failed) > 0 {
			errs = append(errs, rerr)
		}
	}
	l.observe(ctx, len(nos), lease, now.Sub(start))
	if len(lease.failed) > 0 {
		if len(errs) == 0 {
			errs = append(errs, errors.New("no quorum"))
		}
		return lease, fmt.Errorf("lock %d of %d orders: %w", len(lease.failed), len(nos), errors.Join(errs...))
	}
	return lease, nil
}

// decide counts each key's answers from every node (results[node][key],
// keys[k] the key of nos[k]) and records it in the lease: held when a quorum
// set it in time, failed when no quorum answered or the answers came too
// late, neither when someone else holds it. It returns the keys that may
// carry our token on some node and must be deleted again.
func (l *Locker) decide(lease *Lease, nos, keys []string, results [][]setResult, inTime bool) []string {
	var notHeld []string
	for k, no := range nos {
		var ok, taken int
		for i := range l.nodes {
			switch results[i][k] {
			case setOK:
				ok++
			case setTaken:
				taken++
			}
		}
		switch {
		case ok >= l.quorum && inTime:
			lease.held[no] = true
		case taken > 0 && ok+taken >= l.quorum:
			// Someone else holds it: a quorum answered, and a node says so.
			if taken < len(l.nodes) {
				notHeld = append(notHeld, keys[k])
			}
		default:
			// No quorum answered (Redis unreachable: a node saying "taken"
			// among too few answers proves nothing about the majority), or
			// the answers came back after the validity window had closed.
			if lease.failed == nil {
				lease.failed = map[string]bool{}
			}
			lease.failed[no] = true
			notHeld = append(notHeld, keys[k])
		}
	}
	return notHeld
}

// nodeErrors turns Acquire's errors into what it reports: the first
// len(l.nodes) are the nodes' own (each a *redsync.RedisError naming its
// node and its address, nodeName), any after them are the lease's own and
// stay as they are.
func (l *Locker) nodeErrors(nodeErrs []error) []error {
	var errs []error
	for i, e := range nodeErrs {
		switch {
		case e == nil:
		case i < len(l.nodes):
			errs = append(errs, &redsync.RedisError{Node: i, Err: fmt.Errorf("%s: %w", nodeName(l.nodes[i]), e)})
		default:
			errs = append(errs, e)
		}
	}
	return errs
}

type setResult uint8

const (
	setError setResult = iota // the node did not answer for this key
	setOK                     // SET NX succeeded: the node holds our token
	setTaken                  // the key exists: someone else holds it
)

// setNX pipelines `SET key token PX ttl NX` for every key on one node. A
// pipeline that fails as a whole marks every key setError.
func (l *Locker) setNX(ctx context.Context, node redis.UniversalClient, keys []string, token string) ([]setResult, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	out := make([]setResult, len(keys))
	ttl := strconv.FormatInt(l.ttl.Milliseconds(), 10)
	pipe := node.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Do(ctx, "set", k, token, "px", ttl, "nx")
	}
	_, err := pipe.Exec(ctx)
	var firstErr error
	for i, c := range cmds {
		switch e := c.Err(); {
		case e == nil:
			out[i] = setOK
		case errors.Is(e, redis.Nil):
			out[i] = setTaken
		default:
			out[i] = setError
			if firstErr == nil {
				firstErr = e
			}
		}
	}
	if firstErr == nil && err != nil && !errors.Is(err, redis.Nil) {
		firstErr = err
	}
	return out, firstErr
}

// deleteScript is redsync's release script: delete KEYS[1] only if its value
// is ARGV[1] (our token). Returns 1 deleted, 0 held by another token, -1
// missing (expired). One key per call, so it runs on a Cluster.
var deleteScript = redis.NewScript(`
	local val = redis.call("GET", KEYS[1])
	if val == ARGV[1] then
		return redis.call("DEL", KEYS[1])
	elseif val == false then
		return -1
	else
		return 0
	end
`)

// releaseKeys runs deleteScript for every key on every node, pipelined per
// node and nodes in parallel, under its own timeout and without the caller's
// cancellation (a cancelled run still releases its locks).
func (l *Locker) releaseKeys(ctx context.Context, token string, keys []string) error {
	ctx = context.WithoutCancel(ctx)
	errs := make([]error, len(l.nodes))
	l.onNodes(func(i int, node redis.UniversalClient) {
		if err := l.compareAndDelete(ctx, node, token, keys); err != nil {
			errs[i] = &redsync.RedisError{Node: i, Err: err}
		}
	})
	return errors.Join(errs...)
}

func (l *Locker) compareAndDelete(ctx context.Context, node redis.UniversalClient, token string, keys []string) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	run := func(keys []string, sha bool) ([]string, error) {
		pipe := node.Pipeline()
		cmds := make([]*redis.Cmd, len(keys))
		for i, k := range keys {
			if sha {
				cmds[i] = deleteScript.EvalSha(ctx, pipe, []string{k}, token)
			} else {
				cmds[i] = deleteScript.Eval(ctx, pipe, []string{k}, token)
			}
		}
		_, _ = pipe.Exec(ctx) // errors are read per command below
		var noScript []string
		var firstErr error
		for i, c := range cmds {
			e := c.Err()
			switch {
			case e == nil || errors.Is(e, redis.Nil):
			case sha && strings.HasPrefix(e.Error(), "NOSCRIPT"):
				noScript = append(noScript, keys[i])
			case firstErr == nil:
				firstErr = e
			}
		}
		return noScript, firstErr
	}
	retry, err := run(keys, true)
	if err == nil && len(retry) > 0 {
		// The script cache was empty (new node, SCRIPT FLUSH): send the source.
		_, err = run(retry, false)
	}
	return err
}

// onNodes runs fn for every node, in parallel when there are several, and
// returns when all have finished.
func (l *Locker) onNodes(fn func(i int, node redis.UniversalClient)) {
	if len(l.nodes) == 1 {
		fn(0, l.nodes[0])
		return
	}
	var wg sync.WaitGroup
	for i, n := range l.nodes {
		wg.Go(func() { fn(i, n) })
	}
	wg.Wait()
}

func (l *Locker) keys(nos []string) []string {
	keys := make([]string, len(nos))
	for i, no := range nos {
		keys[i] = l.KeyFor(no)
	}
	return keys
}

func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func uniq(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Observer receives what each Acquire did, for metrics. It is called
// synchronously on the goroutine that called Acquire, so it must be cheap
// and must not block; ctx is the caller's.
type Observer interface {
	// LocksAcquired is called after each Acquire that asked for at least
	// one lock.
	LocksAcquired(ctx context.Context, r Report)
}

// Report is what one Acquire call did: Keys = Held + Taken + Failed.
type Report struct {
	Keys     int           // distinct orders asked for
	Held     int           // locked by this call
	Taken    int           // held by someone else (contention)
	Failed   int           // undecided because Redis failed
	Duration time.Duration // from the first SET to the last answer
}

// observe reports one Acquire call.
func (l *Locker) observe(ctx context.Context, keys int, lease *Lease, d time.Duration) {
	if l.obs == nil || keys == 0 {
		return
	}
	held, failed := lease.Len(), len(lease.failed)
	l.obs.LocksAcquired(ctx, Report{Keys: keys, Held: held, Failed: failed, Taken: keys - held - failed, Duration: d})
}

// nodeName says where node is, for errors: an unreachable server's own
// error is often only the lock's deadline, which names no address.
func nodeName(node redis.UniversalClient) string {
	switch c := node.(type) {
	case *redis.ClusterClient:
		return "redis cluster " + strings.Join(c.Options().Addrs, ",")
	case *redis.Client:
		if addr := c.Options().Addr; addr != "FailoverClient" {
			return "redis " + addr
		}
		return "redis sentinel master"
	}
	return "redis"
}
