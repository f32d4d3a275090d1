package xxljob

import (
	"time"

	"github.com/orderjob/executor/xxljob/authguard"
)

// SetIdleTimeout shortens the idle exit of job threads; call before Start.
func SetIdleTimeout(e *Executor, d time.Duration) { e.runner.idleTimeout = d }

// ThreadCount returns the number of live job threads.
func ThreadCount(e *Executor) int { return e.runner.threadCount() }

// Listening returns the configured listen address and advertised address.
func Listening(e *Executor) (listen, address string) { return e.cfg.ListenAddr, e.cfg.Address }

// SetAuthBurst lets tests that send many wrong tokens on purpose have that
// many failures before the address is refused; call before Start.
func SetAuthBurst(e *Executor, burst int) {
	e.guard = authguard.New(authguard.Config{Surface: "executor", Burst: burst, Logger: e.log, OnFailure: e.authFailedFunc()})
}

// SpoolFsyncs is how many fsyncs the callback spool's appends made.
func SpoolFsyncs(e *Executor) uint64 { return e.callback.spool.syncs.Load() }

// SyncBuffer is a log destination written by several goroutines.
type SyncBuffer = syncBuffer
