package xxljob

import "time"

// SetIdleTimeout shortens the idle exit of job threads; call before Start.
func SetIdleTimeout(e *Executor, d time.Duration) { e.runner.idleTimeout = d }

// ThreadCount returns the number of live job threads.
func ThreadCount(e *Executor) int { return e.runner.threadCount() }

// Listening returns the configured listen address and advertised address.
func Listening(e *Executor) (listen, address string) { return e.cfg.ListenAddr, e.cfg.Address }
