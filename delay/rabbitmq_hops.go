package delay

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/orderjob/executor/internal/rabbit"
)

// The RabbitMQ timer needs no plugin: a message waits in delay-tier queues,
// each a quorum queue with one queue-level TTL (so its messages expire in
// the order they came, and a short wait never sits behind a long one, as
// per-message TTLs in one queue would), dead-lettered at least once into
// the ready queue when the TTL ends. A consumer of the ready queue sends
// the message on to its next tier, or, with less than the smallest tier
// left, holds it in memory until it is due.
//
// The tiers are powers of two seconds, so a wait of w seconds takes about
// one hop per binary digit of w: at most 17 for 36 hours, 4 to 6 for 30
// minutes, and one more per 18 hours beyond. Each hop is planned from the
// time left when the message comes back, so a late dead-lettering shortens
// the next hop instead of adding up; and a hop always leaves at least
// hopLead to wait in memory, so that the last one, dead-lettered a little
// late as it may be (a few ms typically, ~100 ms on a saturated broker),
// still lands before the due time. What is held in memory is therefore
// less than a second plus hopLead.
var rabbitTiers = func() []time.Duration {
	tiers := make([]time.Duration, 17) // 1s .. 65536s (18h12m16s)
	for i := range tiers {
		tiers[i] = time.Duration(1<<i) * time.Second
	}
	return tiers
}()

// hopLead is the least a hop leaves to wait after it (see above).
const hopLead = 100 * time.Millisecond

// rabbitHop is where a message goes with left to wait: the largest tier
// that leaves at least hopLead, or none (0: straight to the ready queue,
// to be held in memory).
func rabbitHop(left time.Duration) time.Duration {
	hop := time.Duration(0)
	for _, t := range rabbitTiers {
		if t > left-hopLead {
			break
		}
		hop = t
	}
	return hop
}

// rabbitPlan is the hops of a wait of left if every tier took exactly its
// TTL: what a task of that delay goes through, the last entry being the
// time it is held in memory.
func rabbitPlan(left time.Duration) (hops []time.Duration, held time.Duration) {
	for {
		h := rabbitHop(left)
		if h == 0 {
			return hops, max(left, 0)
		}
		hops = append(hops, h)
		left -= h
	}
}

// rabbitNames are the timer's exchange and queue names under one prefix.
type rabbitNames struct {
	prefix string
}

// hop is the exchange the tier queues dead-letter into; it routes to the
// ready queue.
func (n rabbitNames) hop() string   { return n.prefix + "hop" }
func (n rabbitNames) ready() string { return n.prefix + "ready" }

// tier names the queue of a tier: {prefix}wait.64s.
func (n rabbitNames) tier(d time.Duration) string {
	return n.prefix + "wait." + strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

// queues lists every queue: the tiers, then the ready queue.
func (n rabbitNames) queues() []string {
	out := make([]string, 0, len(rabbitTiers)+1)
	for _, t := range rabbitTiers {
		out = append(out, n.tier(t))
	}
	return append(out, n.ready())
}

// readyKey routes from the hop exchange to the ready queue.
const readyKey = "ready"

// declare declares the topology; every declaration is idempotent, and one
// that conflicts with what exists (a classic queue of the same name, other
// arguments) is refused by the broker, which closes the channel.
func (n rabbitNames) declare(ch *amqp.Channel) error {
	if err := ch.ExchangeDeclare(n.hop(), amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", n.hop(), err)
	}
	if _, err := ch.QueueDeclare(n.ready(), true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return fmt.Errorf("declare queue %s: %w", n.ready(), err)
	}
	if err := ch.QueueBind(n.ready(), readyKey, n.hop(), false, nil); err != nil {
		return fmt.Errorf("bind queue %s: %w", n.ready(), err)
	}
	for _, t := range rabbitTiers {
		args := amqp.Table{
			"x-queue-type":              "quorum",
			"x-message-ttl":             t.Milliseconds(),
			"x-dead-letter-exchange":    n.hop(),
			"x-dead-letter-routing-key": readyKey,
			// At-least-once dead-lettering (quorum queues only, and only
			// with reject-publish): a message leaves the tier only once the
			// ready queue has confirmed it, where at-most-once would drop
			// it if the ready queue were unavailable at that moment.
			"x-dead-letter-strategy": "at-least-once",
			"x-overflow":             "reject-publish",
		}
		if _, err := ch.QueueDeclare(n.tier(t), true, false, false, false, args); err != nil {
			return fmt.Errorf("declare queue %s: %w", n.tier(t), err)
		}
	}
	return nil
}

// deleteAll removes the topology (tests and operators switching back).
func (n rabbitNames) deleteAll(ch *amqp.Channel) error {
	for _, q := range n.queues() {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			return fmt.Errorf("delete queue %s: %w", q, err)
		}
	}
	if err := ch.ExchangeDelete(n.hop(), false, false); err != nil {
		return fmt.Errorf("delete exchange %s: %w", n.hop(), err)
	}
	return nil
}

// rabbitMessage is a message's body: the task, when it is due and which
// attempt that is. Never the payload: the row holds it, and a message that
// outlives its task (cancelled, done by the sweep) carries nothing stale.
type rabbitMessage struct {
	ID      int64 `json:"id"`
	DueMs   int64 `json:"due"`               // Unix ms, database clock
	Attempt int   `json:"attempt,omitempty"` // 1 for the first; 0 unknown
}

func (m rabbitMessage) due() time.Time { return time.UnixMilli(m.DueMs).UTC() }

// publishing builds the message for e, routed for the hop of left.
func (n rabbitNames) publishing(e timerEntry, left time.Duration) rabbit.Message {
	body, _ := json.Marshal(rabbitMessage{ID: e.ID, DueMs: e.Time.UnixMilli(), Attempt: e.Attempt})
	key := n.ready()
	if h := rabbitHop(left); h > 0 {
		key = n.tier(h)
	}
	return rabbit.Message{Key: key, Msg: amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		Type:         "delay.task",
		Body:         body,
	}}
}

func decodeRabbitMessage(body []byte) (rabbitMessage, error) {
	var m rabbitMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return m, err
	}
	if m.ID <= 0 || m.DueMs <= 0 {
		return m, fmt.Errorf("no task id or due time in %q", body)
	}
	return m, nil
}
