// Package rabbittest connects tests to the shared RabbitMQ named by
// TEST_RABBITMQ_URL (default amqp://guest:guest@127.0.0.1:5672/) with a
// name prefix per test, whose queues and exchanges are deleted when the
// test ends, and drives the broker side of faults with rabbitmqctl: closing
// a test's connections, purging its queues. It never stops or resets the
// broker, which other tests and programs share.
//
// A broker that does not answer fails the test.
package rabbittest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// URL is the shared test broker.
func URL() string {
	if v := os.Getenv("TEST_RABBITMQ_URL"); v != "" {
		return v
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// Prefix returns a name prefix unique to t ("test.{random}."), after
// checking that the broker answers. Every queue and exchange whose name
// starts with it is deleted when the test ends.
func Prefix(t testing.TB) string {
	t.Helper()
	conn, err := amqp.Dial(URL())
	if err != nil {
		t.Fatalf("rabbittest: RabbitMQ at %s does not answer (%v); start it (rabbitmq-server -detached, see docs/development.md) or set TEST_RABBITMQ_URL", URL(), err)
	}
	conn.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "test." + hex.EncodeToString(b) + "."
	t.Cleanup(func() { deleteAll(t, prefix) })
	return prefix
}

// deleteAll deletes the queues and exchanges named prefix*.
func deleteAll(t testing.TB, prefix string) {
	conn, err := amqp.Dial(URL())
	if err != nil {
		t.Errorf("rabbittest: clean up %s*: %v", prefix, err)
		return
	}
	defer conn.Close()
	for _, kind := range []string{"queues", "exchanges"} {
		var rows []struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal([]byte(Ctl(t, "list_"+kind, "name", "--formatter", "json")), &rows); err != nil {
			t.Errorf("rabbittest: list %s: %v", kind, err)
			continue
		}
		for _, r := range rows {
			if !strings.HasPrefix(r.Name, prefix) {
				continue
			}
			ch, err := conn.Channel()
			if err != nil {
				t.Errorf("rabbittest: clean up %s: %v", r.Name, err)
				return
			}
			if kind == "queues" {
				_, err = ch.QueueDelete(r.Name, false, false, false)
			} else {
				err = ch.ExchangeDelete(r.Name, false, false)
			}
			if err != nil {
				t.Errorf("rabbittest: delete %s: %v", r.Name, err)
			}
			ch.Close()
		}
	}
}

// Ctl runs rabbitmqctl -q with args and returns its output, failing the
// test if it fails.
func Ctl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("rabbittest: rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// CloseConnections closes, from the broker's side, every connection whose
// connection_name starts with namePrefix, and returns how many.
func CloseConnections(t testing.TB, namePrefix string) int {
	t.Helper()
	// Plain output: the pid column is the node-qualified form that
	// close_connection takes (the JSON formatter's is not).
	out := Ctl(t, "list_connections", "pid", "client_properties", "--no-table-headers")
	n := 0
	for _, line := range strings.Split(out, "\n") {
		pid, props, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			continue
		}
		if strings.Contains(props, `{"connection_name","`+namePrefix) {
			Ctl(t, "close_connection", pid, "closed by a test")
			n++
		}
	}
	return n
}

// Purge empties a queue: queue.purge, the operation rabbitmqctl
// purge_queue runs, without its two seconds of CLI start-up.
func Purge(t testing.TB, queue string) {
	t.Helper()
	conn, err := amqp.Dial(URL())
	if err != nil {
		t.Fatalf("rabbittest: purge %s: %v", queue, err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("rabbittest: purge %s: %v", queue, err)
	}
	if _, err := ch.QueuePurge(queue, false); err != nil {
		t.Fatalf("rabbittest: purge %s: %v", queue, err)
	}
}
