package delay

import (
	"testing"
	"time"
)

// Whatever lands in the ready queue (another producer's message, a
// truncated body) decodes to a task with an id and a due time, or to an
// error, and a task's message decodes to itself.
func FuzzDecodeRabbitMessage(f *testing.F) {
	f.Add([]byte(`{"id":123,"due":1767225600123,"attempt":1}`))
	f.Add([]byte(`{"id":-1,"due":5}`))
	f.Add([]byte(`{"id":1}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"id":9223372036854775807,"due":9223372036854775807,"attempt":-3}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := decodeRabbitMessage(body)
		if err != nil {
			return
		}
		if m.ID <= 0 || m.DueMs <= 0 {
			t.Fatalf("decoded %+v from %q without an id and a due time", m, body)
		}
		e := timerEntry{ID: m.ID, Time: m.due(), Attempt: m.Attempt}
		got, err := decodeRabbitMessage(rabbitNames{prefix: "p."}.publishing(e, time.Second).Msg.Body)
		if err != nil || got != m {
			t.Fatalf("%+v round-tripped to %+v, %v", m, got, err)
		}
	})
}
