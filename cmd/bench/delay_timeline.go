package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// printTimeline prints, per slice of execute time from firstDue, how many
// tasks came due in it and their lateness (p50, p99, max), so that a tail
// shows whether it is spread over the run or comes from a few moments (a
// reconcile pass, a purge, a stall).
func printTimeline(w io.Writer, tr *delayBenchTracker, firstDue time.Time, step time.Duration) {
	var buckets [][]float64
	for i := range tr.firstStart {
		s := tr.firstStart[i].Load()
		if s == 0 {
			continue
		}
		at := tr.executeAt[i].Load()
		b := int(time.Duration(at-firstDue.UnixNano()) / step)
		if b < 0 {
			b = 0
		}
		for len(buckets) <= b {
			buckets = append(buckets, nil)
		}
		buckets[b] = append(buckets[b], float64(s-at)/1e6)
	}
	fmt.Fprintf(w, "timeline (by execute time, %s slices): from_s tasks p50_ms p99_ms max_ms\n", step)
	for b, late := range buckets {
		if len(late) == 0 {
			continue
		}
		slices.Sort(late)
		fmt.Fprintf(w, "timeline %6.1f %6d %7.1f %7.1f %7.1f\n", (time.Duration(b) * step).Seconds(), len(late),
			dbenchPercentile(late, 50), dbenchPercentile(late, 99), late[len(late)-1])
	}
}
