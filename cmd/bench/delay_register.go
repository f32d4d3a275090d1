package main

import (
	"fmt"
	"io"
	"time"
)

// registration is how a run's registration went: n tasks in took, done
// ahead before the first due time (negative: after it), errs errors, the
// producer at most behind its schedule (registering during the run).
type registration struct {
	n           int
	took, ahead time.Duration
	errs        int64
	behind      time.Duration
}

// printRegistration prints the registration line (with -steady or
// -register-during: its rate beside the rate tasks fall due) and reports
// whether registration ran past the first due time when all tasks were to
// be registered before it, with a warning: the figures are then a
// backlog's.
func printRegistration(w io.Writer, o *delayFlags, r registration) bool {
	rate := float64(r.n) / r.took.Seconds()
	if o.during {
		fmt.Fprintf(w, "registration: during the run, %s ahead, %d tasks at %.0f/s, %d errors; the producer was at most %s behind its schedule\n",
			o.lead, r.n, rate, r.errs, r.behind.Round(time.Millisecond))
		return false
	}
	fmt.Fprintf(w, "registration: all %d before the run, in %s (%.0f/s), %d errors, done %s before the first due time\n",
		r.n, r.took.Round(time.Millisecond), rate, r.errs, r.ahead.Round(time.Millisecond))
	if r.ahead >= 0 {
		return false
	}
	fmt.Fprintf(w, "WARNING: registration ran %s past the first due time, so the tasks came due as a backlog: rerun with -register-rate under %.0f\n",
		-r.ahead.Round(time.Millisecond), rate)
	return true
}
