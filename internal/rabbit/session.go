// Package rabbit keeps one client connection to RabbitMQ alive, which
// amqp091-go leaves to its callers: a Session dials with backoff, declares
// the caller's topology on every connect (declarations are idempotent, so a
// reconnect re-declares what exists and recreates what was deleted), then
// either publishes with confirms or consumes one queue with manual
// acknowledgement, and goes through the same steps again whenever the broker
// or the network closes the connection. Err says why a session is down
// (unreachable, credentials refused, a topology that conflicts with what the
// broker holds), for readiness checks and logs.
//
// Publishing and consuming use separate sessions (separate connections):
// the broker throttles a publishing connection under a resource alarm, and
// acknowledgements must still get through then.
//
// Deliveries carry the generation of the channel they came on: after a
// reconnect the broker redelivers what the old channel left unacknowledged,
// and an Ack of an older generation is dropped (ErrStale) instead of
// acknowledging a different message that reuses its delivery tag.
package rabbit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/orderjob/executor/internal/backoff"
	"github.com/orderjob/executor/internal/redact"
)

// Errors of a Session.
var (
	// ErrDown: the session has no connection now; Err says why.
	ErrDown = errors.New("rabbit: not connected")
	// ErrStale: the delivery came on a channel that has closed since; the
	// broker redelivers it.
	ErrStale = errors.New("rabbit: delivery of a closed channel")
	// ErrReturned: the broker could not route the message (its queue does
	// not exist); the session re-declares the topology.
	ErrReturned = errors.New("rabbit: message returned unroutable")
	// ErrNacked: the broker refused the message (a queue at its limit with
	// overflow reject-publish, or an internal error).
	ErrNacked = errors.New("rabbit: message refused by the broker")
)

// TopologyError is a declaration the broker refused: typically a queue or
// exchange of the same name that exists with other arguments (a classic
// queue where a quorum queue is declared), which only an operator can
// resolve.
type TopologyError struct {
	Err error
}

func (e *TopologyError) Error() string {
	return "rabbitmq topology conflicts with what the broker holds: " + e.Err.Error()
}

func (e *TopologyError) Unwrap() error { return e.Err }

// Config configures a Session.
type Config struct {
	// URL is amqp://user:password@host:port/vhost. Required.
	URL string
	// Name is the connection's connection_name, which rabbitmqctl
	// list_connections and the management UI show.
	Name string
	// Declare declares the topology on a fresh channel of every connection,
	// before anything else; an error ends the connection and is retried.
	Declare func(ch *amqp.Channel) error
	// Consume, when set, makes a consuming session; otherwise the session
	// publishes.
	Consume *Consume
	// Backoff spaces reconnection attempts. Default 100ms doubling to 10s,
	// with equal jitter.
	Backoff backoff.Exponential
	// ConfirmTimeout bounds the wait for a publish confirm. Default 10s.
	ConfirmTimeout time.Duration
	// Logger gets connection losses and recoveries. Nil discards.
	Logger *slog.Logger
}

// Consume describes what a consuming session reads.
type Consume struct {
	Queue    string
	Prefetch int // most unacknowledged deliveries; 1..65535
	// Deliver gets each delivery, in order, on the session's goroutine. It
	// must not block for long: nothing else is read meanwhile.
	Deliver func(Delivery)
	// Lost, optional, is called when a consuming channel has gone away:
	// every delivery of generation gen not acknowledged by then will be
	// redelivered (to this or another consumer).
	Lost func(gen uint64)
}

// Delivery is one message received.
type Delivery struct {
	Body        []byte
	MessageID   string
	Redelivered bool
	Gen         uint64 // generation of the channel it came on
	tag         uint64
}

// Stats are a session's running totals.
type Stats struct {
	Connected  bool
	Connects   int64 // successful connects (the first included)
	Failures   int64 // failed connection attempts and connections lost
	Published  int64 // publishes confirmed
	PubFailed  int64 // publishes not confirmed (nack, return, timeout, down)
	Deliveries int64
}

// Session is a connection kept alive. Start it, publish or consume, Stop it.
type Session struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	conn     *amqp.Connection
	ch       *amqp.Channel // publishing (confirm mode) or consuming
	gen      uint64
	err      error // why it is down; nil when connected
	returns  chan amqp.Return
	returned map[string]bool
	kick     chan struct{}

	// deliveriesCh is the consuming channel's deliveries; only run's
	// goroutine touches it.
	deliveriesCh <-chan amqp.Delivery

	seq                                      atomic.Uint64
	connects, failures, published, pubFailed atomic.Int64
	deliveries                               atomic.Int64
	cancel                                   context.CancelFunc
	done, first                              chan struct{}
	startOnce, stopOnce                      sync.Once
}

// New checks cfg and builds a Session (not started).
func New(cfg Config) (*Session, error) {
	if _, err := amqp.ParseURI(cfg.URL); err != nil {
		return nil, fmt.Errorf("rabbitmq URL %s: %w", redact.URL(cfg.URL), err)
	}
	if c := cfg.Consume; c != nil && (c.Queue == "" || c.Deliver == nil || c.Prefetch < 1 || c.Prefetch > 65535) {
		return nil, fmt.Errorf("rabbit: consume needs a queue, a Deliver func and a prefetch in 1..65535 (got %d)", c.Prefetch)
	}
	if cfg.Backoff.Base == 0 {
		cfg.Backoff = backoff.Exponential{Base: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: backoff.EqualJitter}
	}
	if err := cfg.Backoff.Validate(); err != nil {
		return nil, fmt.Errorf("rabbit: reconnect %w", err)
	}
	cfg.ConfirmTimeout = cmp.Or(cfg.ConfirmTimeout, 10*time.Second)
	s := &Session{
		cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		err:  fmt.Errorf("%w: not started", ErrDown),
		kick: make(chan struct{}, 1), done: make(chan struct{}), first: make(chan struct{}),
		returned: map[string]bool{},
	}
	return s, nil
}

// Start connects in the background and returns once the first attempt has
// succeeded or failed (bounded by the dial timeout); a broker that does not
// answer is not an error here: the session keeps trying, and Err says why it
// is down. The session lives until Stop; ctx only carries values.
func (s *Session) Start(ctx context.Context) {
	s.startOnce.Do(func() {
		ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
		go s.run(ctx)
		select {
		case <-s.first:
		case <-ctx.Done():
		}
	})
}

// Stop closes the connection (a consuming channel's unacknowledged
// deliveries go back to their queue) and waits for the session's goroutine,
// until ctx is done. Safe before Start and twice.
func (s *Session) Stop(ctx context.Context) error {
	started := false
	s.startOnce.Do(func() { close(s.done) }) // never started: nothing to wait for
	s.stopOnce.Do(func() {
		if s.cancel != nil {
			started = true
			s.cancel()
		}
	})
	if !started {
		return nil
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rabbit: stop %s: %w", s.cfg.Name, ctx.Err())
	}
}

// Err is nil while connected with the topology declared, otherwise why not.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stats returns the running totals.
func (s *Session) Stats() Stats {
	return Stats{Connected: s.Err() == nil, Connects: s.connects.Load(), Failures: s.failures.Load(),
		Published: s.published.Load(), PubFailed: s.pubFailed.Load(), Deliveries: s.deliveries.Load()}
}

// run connects, serves until the connection ends, and reconnects with
// backoff, until ctx is done.
func (s *Session) run(ctx context.Context) {
	defer close(s.done)
	firstDone := false
	failures := 0
	for {
		err := s.connect(ctx)
		if err != nil {
			s.down(err)
		}
		if !firstDone {
			firstDone = true
			close(s.first)
		}
		if err == nil {
			failures = 0
			s.connects.Add(1)
			if n := s.connects.Load(); n > 1 {
				s.log.InfoContext(ctx, "rabbitmq connection restored", "connection", s.cfg.Name, "connects", n)
			}
			err = s.serve(ctx)
			s.down(err)
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		s.failures.Add(1)
		if failures == 1 || failures%20 == 0 {
			s.log.WarnContext(ctx, "rabbitmq connection down; reconnecting with backoff", "connection", s.cfg.Name,
				"attempts", failures, "err", err)
		}
		if s.cfg.Backoff.Wait(ctx, failures) != nil {
			return
		}
	}
}

// connect dials, declares the topology and opens the channel.
func (s *Session) connect(ctx context.Context) error {
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Dial:       amqp.DefaultDial(5 * time.Second),
		Properties: amqp.Table{"connection_name": s.cfg.Name},
	})
	if err != nil {
		return fmt.Errorf("%w: rabbitmq at %s unreachable: %w", ErrDown, redact.URL(s.cfg.URL), redact.Err(err))
	}
	fail := func(err error) error {
		_ = conn.Close()
		return err
	}
	if s.cfg.Declare != nil {
		dch, err := conn.Channel()
		if err != nil {
			return fail(fmt.Errorf("%w: open channel: %w", ErrDown, err))
		}
		if err := s.cfg.Declare(dch); err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && (ae.Code == amqp.PreconditionFailed || ae.Code == amqp.AccessRefused || ae.Code == amqp.NotAllowed) {
				return fail(&TopologyError{Err: err})
			}
			return fail(fmt.Errorf("%w: declare topology: %w", ErrDown, err))
		}
		_ = dch.Close()
	}
	ch, err := conn.Channel()
	if err != nil {
		return fail(fmt.Errorf("%w: open channel: %w", ErrDown, err))
	}
	var deliveries <-chan amqp.Delivery
	var returns chan amqp.Return
	if c := s.cfg.Consume; c != nil {
		if err := ch.Qos(c.Prefetch, 0, false); err != nil {
			return fail(fmt.Errorf("%w: set prefetch: %w", ErrDown, err))
		}
		tag := s.cfg.Name + "." + strconv.FormatUint(s.gen+1, 10)
		if deliveries, err = ch.ConsumeWithContext(ctx, c.Queue, tag, false, false, false, false, nil); err != nil {
			return fail(fmt.Errorf("%w: consume %s: %w", ErrDown, c.Queue, err))
		}
	} else {
		if err := ch.Confirm(false); err != nil {
			return fail(fmt.Errorf("%w: confirm mode: %w", ErrDown, err))
		}
		// Buffered, and drained by publishers under mu after each confirm:
		// the broker sends a return before the ack of the same message, so
		// a publisher whose ack came finds the return in the buffer.
		returns = ch.NotifyReturn(make(chan amqp.Return, 1024))
	}
	s.mu.Lock()
	s.conn, s.ch, s.returns, s.err = conn, ch, returns, nil
	s.gen++
	s.returned = map[string]bool{}
	s.mu.Unlock()
	s.deliveriesCh = deliveries
	return nil
}

// serve waits for the connection or its channel to close, handing
// deliveries to Deliver meanwhile, and returns why it ended.
func (s *Session) serve(ctx context.Context) error {
	s.mu.Lock()
	conn, ch, gen := s.conn, s.ch, s.gen
	s.mu.Unlock()
	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	blocked := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	deliveries := s.deliveriesCh
	for {
		select {
		case b := <-blocked:
			// A resource alarm (memory, disk): publishes wait unconfirmed
			// until it clears, so the session counts as down meanwhile.
			s.mu.Lock()
			if b.Active {
				s.err = fmt.Errorf("%w: the broker blocks publishing (%s)", ErrDown, b.Reason)
			} else if s.conn == conn {
				s.err = nil
			}
			s.mu.Unlock()
		case e := <-connClosed:
			return fmt.Errorf("%w: connection closed: %s", ErrDown, closeReason(e))
		case e := <-chClosed:
			return fmt.Errorf("%w: channel closed: %s", ErrDown, closeReason(e))
		case <-s.kick:
			return fmt.Errorf("%w: a message was unroutable; declaring the topology again", ErrDown)
		case d, ok := <-deliveries:
			if !ok {
				return fmt.Errorf("%w: consumer of %s cancelled by the broker (queue deleted?)", ErrDown, s.cfg.Consume.Queue)
			}
			s.deliveries.Add(1)
			s.cfg.Consume.Deliver(Delivery{Body: d.Body, MessageID: d.MessageId, Redelivered: d.Redelivered, Gen: gen, tag: d.DeliveryTag})
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func closeReason(e *amqp.Error) string {
	if e == nil {
		return "closed"
	}
	return e.Error()
}

// down records why the session ended and closes what is left of it.
func (s *Session) down(err error) {
	s.mu.Lock()
	conn, gen, consuming := s.conn, s.gen, s.ch != nil && s.cfg.Consume != nil
	s.conn, s.ch, s.returns = nil, nil, nil
	if err == nil || errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: stopped", ErrDown)
	}
	s.err = err
	s.mu.Unlock()
	s.deliveriesCh = nil
	if conn != nil {
		_ = conn.Close()
	}
	if consuming && s.cfg.Consume.Lost != nil {
		s.cfg.Consume.Lost(gen)
	}
}

// Ack acknowledges a delivery. One of a channel that has closed since
// returns ErrStale (the broker redelivers it).
func (s *Session) Ack(d Delivery) error {
	s.mu.Lock()
	ch, gen := s.ch, s.gen
	s.mu.Unlock()
	if ch == nil || d.Gen != gen {
		return ErrStale
	}
	if err := ch.Ack(d.tag, false); err != nil {
		return fmt.Errorf("rabbit: ack: %w", err)
	}
	return nil
}

// Inspect runs f on a channel of its own (a passive declare of a missing
// queue closes its channel), for counts and checks.
func (s *Session) Inspect(f func(ch *amqp.Channel) error) error {
	s.mu.Lock()
	conn, err := s.conn, s.err
	s.mu.Unlock()
	if conn == nil {
		return cmp.Or(err, ErrDown)
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbit: open channel: %w", err)
	}
	defer ch.Close()
	return f(ch)
}
