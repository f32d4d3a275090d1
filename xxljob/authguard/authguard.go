// Package authguard slows down guessing of a shared token: it counts failed
// authentications per client address in a small token bucket, refuses an
// address whose bucket is empty until it refills, and logs failures at most
// once per address and interval, with their count. It uses only the
// standard library; the xxljob executor and the order executor's API port
// and console use it.
package authguard

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Defaults: ten failures at once per address, then one more per second;
// one log line per address and minute.
const (
	DefaultBurst    = 10
	DefaultRefill   = time.Second
	DefaultLogEvery = time.Minute
)

// maxAddrs bounds the addresses tracked; beyond it, those whose buckets
// refilled are forgotten first.
const maxAddrs = 10000

// Config configures a Guard. Zero values take the defaults.
type Config struct {
	// Surface names what is guarded in the log line ("executor", "api").
	Surface string
	// Burst is how many failures an address may have in a row before it is
	// refused. Default DefaultBurst.
	Burst int
	// Refill is how often an address regains one failure. Default
	// DefaultRefill.
	Refill time.Duration
	// LogEvery is the least time between two log lines about one address.
	// Default DefaultLogEvery.
	LogEvery time.Duration
	// Logger receives the rate-limited lines. Default: discard.
	Logger *slog.Logger
	// OnFailure is called with the address of every failed authentication
	// (a metric).
	OnFailure func(addr string)
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Guard is safe for concurrent use.
type Guard struct {
	cfg   Config
	mu    sync.Mutex
	addrs map[string]*bucket
}

type bucket struct {
	tokens  float64
	at      time.Time // when tokens was computed
	logged  time.Time // the last log line
	pending int       // failures since that line
}

// New returns a Guard.
func New(cfg Config) *Guard {
	cfg.Burst = cmp.Or(cfg.Burst, DefaultBurst)
	cfg.Refill = cmp.Or(cfg.Refill, DefaultRefill)
	cfg.LogEvery = cmp.Or(cfg.LogEvery, DefaultLogEvery)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Guard{cfg: cfg, addrs: map[string]*bucket{}}
}

// Host is the address a request came from, without its port: the key of
// the buckets. Forwarding headers are not trusted.
func Host(remoteAddr string) string {
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return h
	}
	return remoteAddr
}

// refill brings b up to now; callers hold mu.
func (g *Guard) refill(b *bucket, now time.Time) {
	b.tokens = min(float64(g.cfg.Burst), b.tokens+float64(now.Sub(b.at))/float64(g.cfg.Refill))
	b.at = now
}

// Allow reports whether addr may try to authenticate now, and if not, how
// long until it may. Call it before checking the credentials, so that a
// refused address learns nothing about them.
func (g *Guard) Allow(addr string) (bool, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.addrs[addr]
	if !ok {
		return true, 0
	}
	g.refill(b, g.cfg.Now())
	if b.tokens >= 1 {
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) * float64(g.cfg.Refill))
}

// Failed records a failed authentication from addr: it spends one of the
// address's failures, calls OnFailure, and logs a line when the last one
// about addr is LogEvery old, with the failures since.
func (g *Guard) Failed(ctx context.Context, addr string) {
	now := g.cfg.Now()
	g.mu.Lock()
	b, ok := g.addrs[addr]
	if !ok {
		g.forget(now)
		b = &bucket{tokens: float64(g.cfg.Burst), at: now}
		g.addrs[addr] = b
	}
	g.refill(b, now)
	b.tokens = max(0, b.tokens-1)
	b.pending++
	var failures int
	if b.logged.IsZero() || now.Sub(b.logged) >= g.cfg.LogEvery {
		failures, b.pending, b.logged = b.pending, 0, now
	}
	g.mu.Unlock()
	if g.cfg.OnFailure != nil {
		g.cfg.OnFailure(addr)
	}
	if failures > 0 {
		g.cfg.Logger.WarnContext(ctx, "authentication failed", "surface", g.cfg.Surface, "remote", addr,
			"failures", failures, "since_last_line", g.cfg.LogEvery.String())
	}
}

// forget drops addresses whose buckets refilled and whose last line is
// old, when too many are tracked; callers hold mu.
func (g *Guard) forget(now time.Time) {
	if len(g.addrs) < maxAddrs {
		return
	}
	for a, b := range g.addrs {
		g.refill(b, now)
		if b.tokens >= float64(g.cfg.Burst) && now.Sub(b.logged) >= g.cfg.LogEvery {
			delete(g.addrs, a)
		}
	}
	if len(g.addrs) >= maxAddrs {
		clear(g.addrs) // a flood of addresses: start over rather than grow
	}
}
