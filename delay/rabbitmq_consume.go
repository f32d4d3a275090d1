package delay

import (
	"context"
	"errors"
	"regexp"
	"time"

	"github.com/orderjob/executor/internal/rabbit"
)

// rabbitNameRe bounds a prefix so that every name it starts stays within
// RabbitMQ's 255 bytes.
var rabbitNameRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)

// hopInFlight is a message sent on to its next tier, acknowledged once the
// broker confirms the new one.
type hopInFlight struct {
	p *rabbit.Pending
	m *heldMsg
}

// hopRetry is how long a message whose hop was not confirmed waits before
// it is sent on again (while its channel lives; after that the broker
// delivers it again).
const hopRetry = time.Second

// start opens the consuming side for a Dispatcher: a connection of its own
// consuming the ready queue, and the goroutine that acknowledges hops.
func (t *RabbitMQTimer) start(ctx context.Context, wake func(time.Time)) error {
	if !t.started.Load() {
		return errors.New("delay: the RabbitMQ timer must be started before its dispatcher")
	}
	t.consMu.Lock()
	defer t.consMu.Unlock()
	if t.cons != nil {
		return errors.New("delay: the RabbitMQ timer already has a dispatcher")
	}
	// The consuming side lives until stop, whatever becomes of ctx (the
	// dispatcher's Start context, cancelled to begin a shutdown): hops in
	// flight still need their confirms.
	ctx = context.WithoutCancel(ctx)
	cons, err := rabbit.New(rabbit.Config{URL: t.cfg.URL, Name: t.cfg.Prefix + "consume", Declare: t.names.declare,
		Logger: t.log, Consume: &rabbit.Consume{Queue: t.names.ready(), Prefetch: t.cfg.Prefetch,
			Deliver: func(d rabbit.Delivery) { t.onDelivery(ctx, d, wake) }, Lost: t.held.lost}})
	if err != nil {
		return err
	}
	t.cons, t.wake = cons, wake
	t.hops = make(chan hopInFlight, t.cfg.Prefetch+1)
	hops := t.hops
	t.consWG.Go(func() { t.ackHops(ctx, hops) })
	cons.Start(ctx)
	if err := cons.Err(); err != nil {
		t.log.ErrorContext(ctx, "RabbitMQ consumer not connected; retrying", "err", err)
	}
	return nil
}

// stop closes the consuming side: what it held unacknowledged goes back to
// the ready queue for the other executors.
func (t *RabbitMQTimer) stop(ctx context.Context) error {
	t.consMu.Lock()
	cons, hops := t.cons, t.hops
	t.consMu.Unlock()
	if cons == nil {
		return nil
	}
	err := cons.Stop(ctx)
	close(hops)
	t.consWG.Wait()
	t.consMu.Lock()
	t.cons, t.hops, t.wake = nil, nil, nil
	t.consMu.Unlock()
	t.held.clear()
	return err
}

// onDelivery takes a message from the ready queue: sends it on to its next
// tier, or, with less than the smallest tier left, holds it until due.
func (t *RabbitMQTimer) onDelivery(ctx context.Context, d rabbit.Delivery, wake func(time.Time)) {
	msg, err := decodeRabbitMessage(d.Body)
	if err != nil {
		t.log.WarnContext(ctx, "drop a message in the delay ready queue that is not a task's", "message_id", d.MessageID, "err", err)
		t.ack(d)
		return
	}
	m := &heldMsg{id: msg.ID, due: msg.due(), wakeAt: msg.due(), d: d,
		entry: timerEntry{ID: msg.ID, Time: msg.due(), Attempt: msg.Attempt}}
	if left := m.due.Sub(t.clock.Now()); rabbitHop(left) > 0 {
		t.hops <- hopInFlight{p: t.pub.PublishAsync(ctx, t.names.publishing(m.entry, left)), m: m}
		return
	}
	due := m.due // m is the heap's once pushed
	t.held.push(m)
	if wake != nil {
		wake(due)
	}
}

// ackHops acknowledges each hopped message once its successor is
// confirmed, in order; one not confirmed is held and sent on again after
// hopRetry.
func (t *RabbitMQTimer) ackHops(ctx context.Context, hops <-chan hopInFlight) {
	failures := 0
	for h := range hops {
		if err := h.p.Wait(ctx); err != nil {
			if failures++; failures == 1 || failures%1000 == 0 {
				t.log.WarnContext(ctx, "delayed-task message not sent on to its next delay tier; retrying", "task_id", h.m.id,
					"failures", failures, "err", err)
			}
			h.m.resend, h.m.wakeAt = true, time.Now().Add(hopRetry)
			t.held.push(h.m)
			continue
		}
		failures = 0
		t.hopped.Add(1)
		t.ack(h.m.d)
	}
}

// resend sends on again messages whose hop failed.
func (t *RabbitMQTimer) resend(ctx context.Context, ms []*heldMsg) {
	t.consMu.Lock()
	hops := t.hops
	t.consMu.Unlock()
	for _, m := range ms {
		m.resend = false
		left := m.due.Sub(t.clock.Now())
		if hops == nil {
			return
		}
		if rabbitHop(left) == 0 {
			m.wakeAt = m.due
			t.held.push(m)
			continue
		}
		hops <- hopInFlight{p: t.pub.PublishAsync(ctx, t.names.publishing(m.entry, left)), m: m}
	}
}

// rehold moves a popped message of e's task to e's schedule, instead of
// publishing another: held again when due within a second, otherwise sent
// to its next tier and acknowledged once that is confirmed. false when
// this process holds no live message of the task (or the hop failed; the
// message then stays popped for done).
func (t *RabbitMQTimer) rehold(ctx context.Context, e timerEntry) bool {
	m, ok := t.held.takeAlive(e.ID)
	if !ok {
		return false
	}
	m.due, m.wakeAt, m.entry, m.resend = e.Time, e.Time, e, false
	left := e.Time.Sub(t.clock.Now())
	if rabbitHop(left) == 0 {
		t.held.push(m)
		t.mark(e)
		t.consMu.Lock()
		wake := t.wake
		t.consMu.Unlock()
		if wake != nil {
			wake(e.Time)
		}
		return true
	}
	if err := t.pub.PublishAsync(ctx, t.names.publishing(e, left)).Wait(ctx); err != nil {
		t.held.putOut(m)
		return false
	}
	t.published.Add(1)
	t.mark(e)
	t.ack(m.d)
	return true
}

// mark queues e's published_at write. A full queue drops it: the
// reconciler then publishes the task again (a duplicate the claim absorbs).
func (t *RabbitMQTimer) mark(e timerEntry) {
	select {
	case t.marks <- e:
	default:
	}
}

// markLoop writes published_at for confirmed publishes, in batches, every
// few milliseconds; at the end, what is left.
func (t *RabbitMQTimer) markLoop(ctx context.Context) {
	const most = 500
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	batch := make([]timerEntry, 0, most)
	flush := func(ctx context.Context) {
		if len(batch) == 0 {
			return
		}
		if err := t.store.markPublished(ctx, t.db, batch); err != nil && ctx.Err() == nil {
			t.log.WarnContext(ctx, "record tasks published; the reconciler will publish them again", "num_tasks", len(batch), "err", err)
		}
		batch = batch[:0]
	}
	add := func(ctx context.Context, e timerEntry) {
		batch = append(batch, e)
		if len(batch) >= most {
			flush(ctx)
		}
	}
	for {
		select {
		case e := <-t.marks:
			add(ctx, e)
		case <-tick.C:
			flush(ctx)
			// Hops are planned on the database clock; keep its estimate
			// fresh (a round trip a minute).
			_, _ = t.clock.NowSynced(ctx)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			for {
				select {
				case e := <-t.marks:
					add(fctx, e)
				default:
					flush(fctx)
					return
				}
			}
		}
	}
}
