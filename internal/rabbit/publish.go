package rabbit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Message is one message to publish.
type Message struct {
	Exchange, Key string
	Msg           amqp.Publishing
}

// Pending is a publish waiting for its confirm.
type Pending struct {
	s     *Session
	dc    *amqp.DeferredConfirmation
	msgID string
	err   error
}

// PublishAsync sends m (mandatory: unroutable messages come back) and
// returns at once; Wait tells whether the broker took it. A message without
// a MessageId gets one.
func (s *Session) PublishAsync(ctx context.Context, m Message) *Pending {
	if s.cfg.Consume != nil {
		return &Pending{err: errors.New("rabbit: a consuming session does not publish")}
	}
	s.mu.Lock()
	ch, err := s.ch, s.err
	s.mu.Unlock()
	if ch == nil {
		s.pubFailed.Add(1)
		return &Pending{err: cmp.Or(err, ErrDown)}
	}
	if m.Msg.MessageId == "" {
		m.Msg.MessageId = s.cfg.Name + "-" + strconv.FormatUint(s.seq.Add(1), 36)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, m.Exchange, m.Key, true, false, m.Msg)
	if err != nil {
		s.pubFailed.Add(1)
		return &Pending{err: fmt.Errorf("%w: publish: %w", ErrDown, err)}
	}
	return &Pending{s: s, dc: dc, msgID: m.Msg.MessageId}
}

// Failed is the error of a publish that could not even be sent (the
// session down); nil while its confirm is awaited.
func (p *Pending) Failed() error { return p.err }

// Wait waits for the broker's confirm (at most ConfirmTimeout): nil means
// the message is routed to its queues and, with quorum queues, replicated.
func (p *Pending) Wait(ctx context.Context) error {
	if p.err != nil {
		return p.err
	}
	s := p.s
	wctx, cancel := context.WithTimeout(ctx, s.cfg.ConfirmTimeout)
	defer cancel()
	ok, err := p.dc.WaitContext(wctx)
	if err != nil {
		s.pubFailed.Add(1)
		return fmt.Errorf("rabbit: no confirm within %s: %w", s.cfg.ConfirmTimeout, err)
	}
	if !ok {
		s.pubFailed.Add(1)
		return ErrNacked
	}
	if s.takeReturned(p.msgID) {
		s.pubFailed.Add(1)
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return ErrReturned
	}
	s.published.Add(1)
	return nil
}

// takeReturned drains the returns buffer and reports (and forgets) whether
// msgID came back.
func (s *Session) takeReturned(msgID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
drain:
	for s.returns != nil {
		select {
		case r, ok := <-s.returns:
			if !ok {
				break drain
			}
			s.returned[r.MessageId] = true
		default:
			break drain
		}
	}
	if s.returned[msgID] {
		delete(s.returned, msgID)
		return true
	}
	return false
}

// Publish sends msgs and waits for every confirm; errs[i] is msgs[i]'s
// outcome (nil: confirmed), err the first failure.
func (s *Session) Publish(ctx context.Context, msgs []Message) (errs []error, err error) {
	ps := make([]*Pending, len(msgs))
	for i, m := range msgs {
		ps[i] = s.PublishAsync(ctx, m)
	}
	errs = make([]error, len(msgs))
	for i, p := range ps {
		errs[i] = p.Wait(ctx)
		if err == nil {
			err = errs[i]
		}
	}
	return errs, err
}
