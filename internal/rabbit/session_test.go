package rabbit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/orderjob/executor/internal/rabbittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// declareQueue is a topology of one quorum queue, counting its runs.
func declareQueue(name string, runs *atomic.Int32) func(*amqp.Channel) error {
	return func(ch *amqp.Channel) error {
		runs.Add(1)
		_, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		return err
	}
}

func startSession(t *testing.T, cfg Config) *Session {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	s.Start(context.Background())
	t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
	return s
}

// A message to a queue that does not exist comes back (mandatory): the
// publish fails with ErrReturned instead of a confirm that means nothing,
// and the session reconnects and declares its topology again.
func TestPublishUnroutableIsReturned(t *testing.T) {
	t.Parallel()
	prefix := rabbittest.Prefix(t)
	var runs atomic.Int32
	s := startSession(t, Config{URL: rabbittest.URL(), Name: prefix + "pub", Declare: declareQueue(prefix+"q", &runs)})
	require.NoError(t, s.Err())
	ctx := context.Background()

	_, err := s.Publish(ctx, []Message{{Key: prefix + "q", Msg: amqp.Publishing{Body: []byte("a")}}})
	require.NoError(t, err)
	errs, err := s.Publish(ctx, []Message{
		{Key: prefix + "q", Msg: amqp.Publishing{Body: []byte("b")}},
		{Key: prefix + "missing", Msg: amqp.Publishing{Body: []byte("c")}},
	})
	require.ErrorIs(t, err, ErrReturned)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ErrReturned)
	require.Eventually(t, func() bool { return runs.Load() >= 2 && s.Err() == nil }, 20*time.Second, 20*time.Millisecond,
		"declared again after the return")
	st := s.Stats()
	require.Equal(t, int64(2), st.Published)
	require.Equal(t, int64(1), st.PubFailed)
}

// Deliveries of a channel that closed since cannot be acknowledged (the
// broker redelivers them, on the new channel, with new tags).
func TestAckOfAClosedChannelIsStale(t *testing.T) {
	t.Parallel()
	prefix := rabbittest.Prefix(t)
	var runs atomic.Int32
	got := make(chan Delivery, 10)
	var lost atomic.Uint64
	cons := startSession(t, Config{URL: rabbittest.URL(), Name: prefix + "cons", Declare: declareQueue(prefix+"q", &runs),
		Consume: &Consume{Queue: prefix + "q", Prefetch: 10, Deliver: func(d Delivery) { got <- d }, Lost: func(g uint64) { lost.Store(g) }}})
	pub := startSession(t, Config{URL: rabbittest.URL(), Name: prefix + "pub", Declare: declareQueue(prefix+"q", &runs)})
	_, err := pub.Publish(context.Background(), []Message{{Key: prefix + "q", Msg: amqp.Publishing{Body: []byte("x")}}})
	require.NoError(t, err)

	first := <-got
	require.False(t, first.Redelivered)
	require.Equal(t, 1, rabbittest.CloseConnections(t, prefix+"cons"))
	again := <-got
	require.True(t, again.Redelivered)
	require.Greater(t, again.Gen, first.Gen)
	require.Equal(t, first.Gen, lost.Load(), "Lost named the closed generation")
	require.ErrorIs(t, cons.Ack(first), ErrStale)
	require.NoError(t, cons.Ack(again))
	require.Equal(t, int64(1), cons.Stats().Connects-1, "one reconnect")
}

// A broker that does not answer: Start returns, Err says why, Publish fails
// at once; Stop is safe before Start and twice.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	s, err := New(Config{URL: "amqp://guest:pw-SECRET@127.0.0.1:1/", Name: "nowhere"})
	require.NoError(t, err)
	require.NoError(t, s.Stop(context.Background()), "before Start")
	s, err = New(Config{URL: "amqp://guest:pw-SECRET@127.0.0.1:1/", Name: "nowhere"})
	require.NoError(t, err)
	s.Start(context.Background())
	require.ErrorIs(t, s.Err(), ErrDown)
	require.ErrorContains(t, s.Err(), "127.0.0.1:1/ unreachable")
	require.NotContains(t, s.Err().Error(), "SECRET")
	_, err = s.Publish(context.Background(), []Message{{Key: "q"}})
	require.ErrorIs(t, err, ErrDown)
	require.NoError(t, s.Stop(context.Background()))
	require.NoError(t, s.Stop(context.Background()))

	_, err = New(Config{URL: "http://x/"})
	require.Error(t, err)
	_, err = New(Config{URL: "amqp://x/", Consume: &Consume{Queue: "q", Prefetch: 0, Deliver: func(Delivery) {}}})
	require.Error(t, err)
}
