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
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// URL is the shared test broker.
func URL() string {
	return cmp.Or(os.Getenv("TEST_RABBITMQ_URL"), "amqp://guest:guest@127.0.0.1:5672/")
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
	out, err := RunCtl(context.Background(), args...)
	if err != nil {
		t.Fatalf("rabbittest: %v", err)
	}
	return out
}

// RunCtl runs rabbitmqctl -q with args (each call starts an Erlang VM: about
// two seconds) and returns its output.
func RunCtl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("rabbitmqctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// CloseConnections closes, from the broker's side, every connection whose
// connection_name starts with namePrefix, and returns how many.
func CloseConnections(t testing.TB, namePrefix string) int {
	t.Helper()
	n, err := CloseNamed(context.Background(), namePrefix)
	if err != nil {
		t.Fatalf("rabbittest: %v", err)
	}
	return n
}

// CloseNamed is CloseConnections for programs (the bench).
func CloseNamed(ctx context.Context, namePrefix string) (int, error) {
	// Plain output: the pid column is the node-qualified form that
	// close_connection takes (the JSON formatter's is not).
	out, err := RunCtl(ctx, "list_connections", "pid", "client_properties", "--no-table-headers")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		pid, props, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok || !strings.Contains(props, `{"connection_name","`+namePrefix) {
			continue
		}
		if _, err := RunCtl(ctx, "close_connection", pid, "closed on purpose (fault injection)"); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Purge empties a queue: queue.purge, the operation rabbitmqctl
// purge_queue runs, without its two seconds of CLI start-up.
func Purge(t testing.TB, queue string) {
	t.Helper()
	if _, err := PurgeQueues(URL(), queue); err != nil {
		t.Fatalf("rabbittest: %v", err)
	}
}

// PurgeQueues empties queues on the broker at url and returns how many
// messages they held.
func PurgeQueues(url string, queues ...string) (int, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	total := 0
	for _, q := range queues {
		n, err := ch.QueuePurge(q, false)
		if err != nil {
			return total, fmt.Errorf("purge %s: %w", q, err)
		}
		total += n
	}
	return total, nil
}
