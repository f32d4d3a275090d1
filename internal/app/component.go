package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
)

// Component is a long-lived part of a serving process: the API port, the
// outbox relay, the delayed-task dispatcher, the XXL-JOB executor. Start
// returns once the component runs; ctx bounds the start-up only (the
// component runs until Stop) and its values carry over to the work the
// component does. Stop ends it within ctx and is safe before Start and
// more than once. docs/development.md (Start and Stop) has the whole
// contract.
type Component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Components start in the order they were added and stop in reverse: when
// one fails to start, those started before it are stopped again. A
// Components is itself a Component.
type Components struct {
	log  *slog.Logger
	mu   sync.Mutex // held by Start and Stop: a Stop during Start waits for it
	list []namedComponent
	// started is how many of list have started and not stopped since.
	started int
	// once: a Start after Start or Stop fails, as the components' own do.
	begun, stopped bool
}

type namedComponent struct {
	name string
	Component
}

// NewComponents makes an empty list; logger gets a line for each component
// that fails to stop.
func NewComponents(logger *slog.Logger) *Components {
	return &Components{log: logger}
}

// Add appends c under name (for the log) to the list.
func (cs *Components) Add(name string, c Component) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.list = append(cs.list, namedComponent{name, c})
}

// Start starts the components in order. When one fails, the ones started
// before it are stopped in reverse (under ctx's values, without its
// cancellation: a start cut short by a signal still stops cleanly) and the
// start's error is returned. A list starts once.
func (cs *Components) Start(ctx context.Context) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.begun || cs.stopped {
		return errors.New("app: components already started or stopped")
	}
	cs.begun = true
	for ; cs.started < len(cs.list); cs.started++ {
		if err := cs.list[cs.started].Start(ctx); err != nil {
			_ = cs.stop(context.WithoutCancel(ctx)) // logged by stop
			return err
		}
	}
	return nil
}

// Stop stops the started components in reverse order, every one even when
// some fail, and returns their errors joined.
func (cs *Components) Stop(ctx context.Context) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.stopped = true
	return cs.stop(ctx)
}

func (cs *Components) stop(ctx context.Context) error {
	var errs []error
	for ; cs.started > 0; cs.started-- {
		c := cs.list[cs.started-1]
		if err := c.Stop(ctx); err != nil {
			cs.log.ErrorContext(ctx, "stop "+c.name, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
