package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/rabbittest"
)

func dbenchDefaultRabbitMQ() string {
	return cmp.Or(os.Getenv("BENCH_RABBITMQ_URL"), "amqp://guest:guest@127.0.0.1:5672/")
}

// rabbitBench is the RabbitMQ side of a delay bench run: a timer per
// simulated process under the run's own name prefix (its queues deleted at
// the end), the broker-side faults, and the timers' totals.
type rabbitBench struct {
	url, prefix    string
	republishAfter time.Duration
	prefetch       int
	timers         []*delay.RabbitMQTimer // the dispatchers'
	client         *delay.RabbitMQTimer   // the registering process's
	stderr         io.Writer
}

func newRabbitBench(url string, republishAfter time.Duration, prefetch int, stderr io.Writer) *rabbitBench {
	var b [4]byte
	_, _ = rand.Read(b[:])
	rb := &rabbitBench{url: url, prefix: "bench.delay." + hex.EncodeToString(b[:]) + ".", republishAfter: republishAfter,
		prefetch: prefetch, stderr: stderr}
	fmt.Fprintf(stderr, "bench: RabbitMQ prefix %s (queues and exchange deleted at the end)\n", rb.prefix)
	return rb
}

// timer builds and starts one process's timer; the first call's is the
// registering process's, the others are the dispatchers'.
func (rb *rabbitBench) timer(ctx context.Context, db *sqlx.DB, log *slog.Logger, dispatcher bool) (*delay.RabbitMQTimer, error) {
	t, err := delay.NewRabbitMQTimer(db, delay.RabbitMQConfig{URL: rb.url, Prefix: rb.prefix, Logger: log,
		RepublishAfter: rb.republishAfter, Prefetch: rb.prefetch})
	if err != nil {
		return nil, err
	}
	if err := t.Start(ctx); err != nil {
		return nil, err
	}
	if err := t.Check(ctx); err != nil {
		_ = t.Stop(ctx)
		return nil, fmt.Errorf("rabbitmq at %s: %w", rb.url, err)
	}
	if dispatcher {
		rb.timers = append(rb.timers, t)
	} else {
		rb.client = t
	}
	return t, nil
}

// closeConnections has the broker close every connection of the run.
func (rb *rabbitBench) closeConnections(ctx context.Context) (string, error) {
	n, err := rabbittest.CloseNamed(ctx, rb.prefix)
	return fmt.Sprintf("the broker closed %d connections", n), err
}

// purgeTiers empties every delay-tier queue (the ready queue is left).
func (rb *rabbitBench) purgeTiers(context.Context) (string, error) {
	if rb.client == nil {
		return "", errors.New("no timer")
	}
	qs := rb.client.Queues()
	n, err := rabbittest.PurgeQueues(rb.url, qs[:len(qs)-1]...)
	return fmt.Sprintf("purged %d messages from the %d tier queues", n, len(qs)-1), err
}

// stats sums the dispatchers' timers' totals.
func (rb *rabbitBench) stats() delay.RabbitMQStats {
	var s delay.RabbitMQStats
	for _, t := range append([]*delay.RabbitMQTimer{rb.client}, rb.timers...) {
		if t == nil {
			continue
		}
		x := t.Stats()
		s.Published += x.Published
		s.Republished += x.Republished
		s.Hops += x.Hops
		s.Duplicates += x.Duplicates
		s.Failures += x.Failures
		s.Reconnects += x.Reconnects
	}
	return s
}

// close stops the timers (after the dispatchers) and deletes the topology.
func (rb *rabbitBench) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, t := range rb.timers {
		if err := t.Stop(ctx); err != nil {
			fmt.Fprintf(rb.stderr, "bench: stop RabbitMQ timer: %v\n", err)
		}
	}
	if rb.client != nil {
		if err := rb.client.DeleteTopology(ctx); err != nil {
			fmt.Fprintf(rb.stderr, "bench: delete RabbitMQ queues %s*: %v\n", rb.prefix, err)
		}
		_ = rb.client.Stop(ctx)
	}
}
