package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// delayRun is what one rate of bench delay came to.
type delayRun struct {
	rate               int     // tasks due per second; 0: the run ended before its figures
	achieved           float64 // tasks done per second from the first due time
	p50, p99, p999     float64 // lateness, ms
	lost, dup          int
	loadStart, loadEnd string // load average (1, 5, 15 min)
	regOverran         bool   // registration ran past the first due time
}

// keptUp: the run finished its tasks at nearly the rate they came due
// (achieved counts from the first due time to the last task done, so it
// includes the last task's lateness and the completion poll);
// below it a backlog grew and lateness says more about the backlog than
// about the dispatcher.
func (r delayRun) keptUp() bool { return r.achieved >= 0.95*float64(r.rate) }

// parseRates reads -rates: positive whole numbers of tasks per second,
// comma-separated, each once.
func parseRates(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("is empty: want comma-separated rates, such as 1000,5000,10000,20000")
	}
	items := strings.Split(s, ",")
	rates := make([]int, 0, len(items))
	at := map[int]int{}
	for i, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("item %d of %d is empty", i+1, len(items))
		}
		n, err := strconv.Atoi(item)
		if err != nil {
			return nil, fmt.Errorf("item %d, %q, is not a whole number of tasks per second", i+1, item)
		}
		if n < 1 {
			return nil, fmt.Errorf("item %d, %d, is not a positive rate", i+1, n)
		}
		if j, dup := at[n]; dup {
			return nil, fmt.Errorf("item %d, %d, repeats item %d", i+1, n, j)
		}
		at[n] = i + 1
		rates = append(rates, n)
	}
	return rates, nil
}

// runDelaySweep runs the bench at each rate of -rates in turn, each in a
// database of its own, printing each run's figures and a line for it, then
// a table of them all, so the rate where lateness turns up (the knee)
// shows. A rate that lost or doubled tasks does not stop the sweep; the
// sweep fails at the end.
func runDelaySweep(ctx context.Context, o *delayFlags, stdout, stderr io.Writer) error {
	var runs []delayRun
	var failed []error
	for k, rate := range o.rates {
		fmt.Fprintf(stdout, "== sweep %d of %d: %d tasks/s for %s\n", k+1, len(o.rates), rate, o.duration)
		r, err := runDelayRate(ctx, o, rate, stdout, stderr)
		if r.rate == 0 {
			// Not a run's verdict: the bench could not run (or was stopped).
			return errors.Join(append(failed, fmt.Errorf("rate %d/s: %w", rate, err))...)
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("rate %d/s: %w", rate, err))
		}
		runs = append(runs, r)
		fmt.Fprintf(stdout, "sweep rate=%d p50_ms=%.0f p99_ms=%.0f p999_ms=%.0f achieved/s=%.0f lost=%d dup=%d load=%s\n",
			r.rate, r.p50, r.p99, r.p999, r.achieved, r.lost, r.dup, r.loadEnd)
	}
	fmt.Fprintf(stdout, "\nsweep: %d dispatcher(s) x %d workers, handler %s (%s), timer %s, %s at each rate\n",
		o.executors, o.workers, o.handler, o.mode(), o.timerKind, o.duration)
	fmt.Fprintf(stdout, "%8s %11s %8s %8s %8s %6s %6s %8s  %s\n",
		"rate/s", "achieved/s", "p50_ms", "p99_ms", "p999_ms", "lost", "dup", "kept_up", "load average at start -> end (1, 5, 15 min)")
	for _, r := range runs {
		kept := "yes"
		switch {
		case r.regOverran:
			kept = "backlog"
		case !r.keptUp():
			kept = "no"
		}
		fmt.Fprintf(stdout, "%8d %11.0f %8.0f %8.0f %8.0f %6d %6d %8s  %s -> %s\n",
			r.rate, r.achieved, r.p50, r.p99, r.p999, r.lost, r.dup, kept, r.loadStart, r.loadEnd)
	}
	for _, r := range runs {
		if r.regOverran {
			fmt.Fprintln(stdout, "backlog: registration ran past the first due time (the run's WARNING says by how much); its figures are a backlog drain's")
			break
		}
	}
	return errors.Join(failed...)
}
