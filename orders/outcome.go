package orders

import "time"

// Outcome is what happened to one order handed to CloseOrder.
type Outcome int

// Outcomes of CloseOrder. Only OutcomeClosed and OutcomeDeadLettered change
// anything.
const (
	// OutcomeClosed: the order was closed and its stock and coupon restored.
	OutcomeClosed Outcome = iota + 1
	// OutcomeNotDue: the order is unpaid but its timeout has not passed
	// (judged by the database clock); nothing changed.
	OutcomeNotDue
	// OutcomeSkippedPaid: the order is paid; nothing changed.
	OutcomeSkippedPaid
	// OutcomeSkippedClosed: the order was already closed; nothing changed.
	OutcomeSkippedClosed
	// OutcomeSkippedLocked: someone else holds the order's lock (a payment, an
	// other run), Redis could not be reached (the rule at Closer.lockNos),
	// or the lease ran out before commit; nothing changed, a later pass
	// gets it.
	OutcomeSkippedLocked
	// OutcomeDeadLettered: closing failed; the transaction rolled back and the
	// failure is recorded in order_dead_letter for a later retry.
	OutcomeDeadLettered
	// OutcomeNotFound: no order has this number.
	OutcomeNotFound
	// OutcomeParked: the order's close dead letter is parked (an operator
	// looks at it); nothing changed.
	OutcomeParked
)

var outcomeNames = [...]string{
	OutcomeClosed:        "closed",
	OutcomeNotDue:        "not_due",
	OutcomeSkippedPaid:   "skipped_paid",
	OutcomeSkippedClosed: "skipped_closed",
	OutcomeSkippedLocked: "skipped_locked",
	OutcomeDeadLettered:  "dead_lettered",
	OutcomeNotFound:      "not_found",
	OutcomeParked:        "parked",
}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Result is one order's outcome from CloseOrders, with what a caller needs
// to act on it.
type Result struct {
	Outcome Outcome
	// DueIn is, for OutcomeNotDue, how long until the order's deadline by
	// the database clock.
	DueIn time.Duration
	// Err says why, for OutcomeDeadLettered (the close failed), and for
	// OutcomeSkippedLocked when it was not another holder that kept the
	// order but a failure: Redis unreachable (no quorum), the payment-side
	// call, or the lease running out before commit (ErrLeaseExpired).
	Err error
}

// String is the outcome's name.
func (r Result) String() string { return r.Outcome.String() }
