package delay

import (
	"fmt"
	"time"
)

// timeoutsError is a combination of timeouts that lets a task run twice: an
// attempt may still be going (HandlerTimeout, then HandlerGrace after its
// cancellation) when its RUNNING age passes RunningTimeout less the margin
// kept for recording its result, and recovery hands it to another run.
type timeoutsError struct {
	HandlerTimeout, HandlerGrace, RunningTimeout time.Duration
	// MinRunningTimeout is the smallest RunningTimeout that is safe with
	// these HandlerTimeout and HandlerGrace; MaxHandlerTimeout the largest
	// HandlerTimeout safe with these HandlerGrace and RunningTimeout
	// (negative: none).
	MinRunningTimeout, MaxHandlerTimeout time.Duration
}

func (e *timeoutsError) Error() string {
	return fmt.Sprintf("HandlerTimeout %s + HandlerGrace %s exceeds 90%% of RunningTimeout %s: "+
		"an attempt may still run when its task is recovered and run again; "+
		"raise RunningTimeout to at least %s or lower HandlerTimeout to at most %s",
		e.HandlerTimeout, e.HandlerGrace, e.RunningTimeout, e.MinRunningTimeout, e.MaxHandlerTimeout)
}

// checkTimeouts returns a *timeoutsError unless an attempt that honours its
// timeouts (handler at most handlerTimeout, then at most grace after its
// context is cancelled) always ends, its result recorded, before its task
// counts as stuck: handlerTimeout + grace <= 90% of runningTimeout (the
// tenth left is for the result write).
func checkTimeouts(handlerTimeout, grace, runningTimeout time.Duration) error {
	if handlerTimeout > 0 && handlerTimeout+grace <= runningTimeout-runningTimeout/10 {
		return nil
	}
	need := handlerTimeout + grace
	return &timeoutsError{
		HandlerTimeout: handlerTimeout, HandlerGrace: grace, RunningTimeout: runningTimeout,
		MinRunningTimeout: ceilTo((need*10+8)/9, time.Second), // need / 0.9, rounded up
		MaxHandlerTimeout: (runningTimeout - runningTimeout/10 - grace).Truncate(time.Millisecond),
	}
}

// ceilTo rounds d up to a multiple of m.
func ceilTo(d, m time.Duration) time.Duration {
	if r := d % m; r != 0 {
		return d - r + m
	}
	return d
}
