package xxljob

import (
	"strings"
	"testing"
)

// adminRunBody is a /run body as xxl-job-admin 3.4.0 sends it (Gson, the
// TriggerParam fields in their declaration order) for a BEAN job whose
// executorParams is params.
func adminRunBody(params string) []byte {
	return []byte(`{"jobId":7,"executorHandler":"orderTimeoutCloseJob","executorParams":"` + params +
		`","executorBlockStrategy":"SERIAL_EXECUTION","executorTimeout":60,"logId":1234567,` +
		`"logDateTime":1765065600123,"glueType":"BEAN","glueSource":"","glueUpdatetime":1765000000000,` +
		`"broadcastIndex":0,"broadcastTotal":1}`)
}

// BenchmarkDecodeTrigger is the decode of one /run body: a typical admin
// body, and one whose executorParams is 1 MiB (a fifth of maxRequestBody).
func BenchmarkDecodeTrigger(b *testing.B) {
	for _, bc := range []struct {
		name   string
		params string
	}{
		{"admin", `timeoutMinutes=30\nbatchSize=500\nshard=0`},
		{"params1MiB", strings.Repeat("k=v,", 1<<18)},
	} {
		body := adminRunBody(bc.params)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				p, err := decodeTrigger(body)
				if err != nil || p.LogID != 1234567 || len(p.ExecutorParams) < 10 {
					b.Fatalf("decodeTrigger: %+v, %v", p.LogID, err)
				}
			}
		})
	}
}
