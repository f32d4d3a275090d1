package config

import (
	"fmt"
	"time"
)

// CloseCancelBound is how long the order close path (Run, CloseOrder and
// CloseOrders of orders.Closer) may go on after its context is cancelled,
// for a lock TTL: the page in progress finishes within its lease, then the
// lock calls' timeouts and 3s for dead letters (orders.Closer.CancelBound;
// a test keeps the two equal).
func CloseCancelBound(lockTTL time.Duration) time.Duration {
	lockCall := max(lockTTL/20, 200*time.Millisecond)
	return lockTTL + 2*lockCall + 3*time.Second
}

// checkDoubleRun rejects delayed-task timeouts that let a task run twice:
// an orderTimeoutClose attempt may run for handlerTimeout, then for the
// close path's cancellation bound, and its result must be recorded (the
// last tenth of runningTimeout) before recovery may take the task as stuck.
func checkDoubleRun(handlerTimeout, lockTTL, runningTimeout time.Duration) []error {
	bound := CloseCancelBound(lockTTL)
	need := handlerTimeout + bound
	limit := runningTimeout - runningTimeout/10
	if need <= limit {
		return nil
	}
	minRunning := ((need*10 + 8) / 9).Round(time.Second)
	if minRunning-minRunning/10 < need {
		minRunning += time.Second
	}
	fix := fmt.Sprintf("raise delay.runningTimeout to at least %s", minRunning)
	if maxHandler := limit - bound; maxHandler > 0 {
		fix += fmt.Sprintf(", or lower delay.handlerTimeout to at most %s", maxHandler.Truncate(time.Millisecond))
	} else {
		fix += ", or lower order.close.lockTTL"
	}
	return []error{fmt.Errorf("delay.handlerTimeout (%s) + the close path's cancellation bound (%s for order.close.lockTTL %s) = %s "+
		"exceeds 90%% of delay.runningTimeout (%s): a close still going after its handler timed out could see its task "+
		"recovered and run a second time; %s",
		handlerTimeout, bound, lockTTL, need, runningTimeout, fix)}
}
