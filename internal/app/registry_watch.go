package app

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// deadTimeout is the admin's: a registration older than this is dropped.
const deadTimeout = 90 * time.Second

// registryWatch remembers the last successful registration for /readyz.
type registryWatch struct {
	mu      sync.Mutex
	last    time.Time
	lastErr error
}

func (w *registryWatch) RunStarted(string, int, int64)                      {}
func (w *registryWatch) RunFinished(string, int, int64, int, time.Duration) {}
func (w *registryWatch) CallbackSent(int, error)                            {}
func (w *registryWatch) CallbackSpool(int)                                  {}
func (w *registryWatch) Registered(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.last = time.Now()
	}
	w.lastErr = err
}

func (w *registryWatch) check(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last.IsZero() {
		return fmt.Errorf("not registered with any admin yet (last error: %v)", w.lastErr)
	}
	if age := time.Since(w.last); age > deadTimeout {
		return fmt.Errorf("last successful registration %s ago, over the admin's %s dead timeout (last error: %v)", age.Round(time.Second), deadTimeout, w.lastErr)
	}
	return nil
}
