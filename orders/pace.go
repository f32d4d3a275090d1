package orders

import (
	"context"
	"time"
)

// pacer caps the close rate: before a page it waits until the run has been
// going for at least closed/rate, so the average since the start never exceeds
// the rate by more than one page (pages are cut to a tenth of a second's worth
// when a rate is set).
type pacer struct {
	rate  float64 // orders per second; 0 means unlimited
	start time.Time
}

func (p pacer) wait(ctx context.Context, closed int) error {
	if p.rate <= 0 || closed == 0 {
		return nil
	}
	d := time.Until(p.start.Add(time.Duration(float64(closed) / p.rate * float64(time.Second))))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
