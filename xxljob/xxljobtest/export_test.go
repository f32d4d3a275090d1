package xxljobtest

import (
	"fmt"
	"time"
)

// WaitHanging waits until at least n requests are held unanswered.
func WaitHanging(a *Admin, n int, timeout time.Duration) error {
	if err := a.wait(timeout, func() bool { return a.hanging >= n }); err != nil {
		return fmt.Errorf("xxljobtest: fewer than %d hanging requests: %w", n, err)
	}
	return nil
}
