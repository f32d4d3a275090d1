package outbox

import (
	"errors"
	"fmt"
)

// deliveryError is a delivery the receiver answered with a status other
// than 2xx.
type deliveryError struct {
	Status int
	Err    error
}

func (e *deliveryError) Error() string { return e.Err.Error() }
func (e *deliveryError) Unwrap() error { return e.Err }

// permanentStatus reports whether a receiver's answer says that sending the
// same event again cannot succeed: the request is malformed or refused
// (400, 422), not allowed (401, 403: a wrong token stays wrong), aimed at
// nothing (404, 410) or in conflict with the receiver's state (409). 408
// (timeout) and 429 (slow down) are not: they ask to come back later.
func permanentStatus(status int) bool {
	switch status {
	case 400, 401, 403, 404, 409, 410, 422:
		return true
	}
	return false
}

// parkReason says why an event whose attempt-th delivery failed with err is
// parked instead of retried: a permanent answer, or the last attempt
// allowed. "" means retry.
func (r *Relay) parkReason(err error, attempt int) string {
	var de *deliveryError
	if errors.As(err, &de) && permanentStatus(de.Status) {
		return fmt.Sprintf("permanent answer: status %d", de.Status)
	}
	if r.cfg.MaxAttempts > 0 && attempt >= r.cfg.MaxAttempts {
		return fmt.Sprintf("%d attempts failed (outbox.maxAttempts)", attempt)
	}
	return ""
}
