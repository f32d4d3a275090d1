package xxljob

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errShutdown is the cancellation cause of whatever still runs when the
// executor has shut down.
var errShutdown = errors.New("xxljob: executor shut down")

// Shutdown stops the executor in order:
//
//  1. /beat and /idleBeat fail from now on, so the admin's FAILOVER and
//     BUSYOVER routes pick another executor (as at a Java executor's closed
//     port); registryRemove, so the admin drops this address at its next
//     refresh;
//  2. /run is refused and the triggers still queued are killed at once
//     (CodeFail, "web container destroy and kill the job. [job not executed,
//     in the job queue, killed.]"), as the Java executor does; /log and /kill
//     keep serving the runs that drain;
//  3. running runs get up to ShutdownTimeout (or until ctx ends) to finish;
//     the rest are cancelled and report CodeFail with reason
//     "web container destroy and kill the job.";
//  4. queued callbacks get one delivery attempt under their own deadline;
//     what no admin accepts stays in the disk spool for the next start;
//  5. the HTTP server is closed and every goroutine has stopped.
//
// A handler that ignores cancellation is waited for until ctx ends; the
// error then says so. Shutdown is safe to call more than once and before
// Start; later calls wait for the first one and return its result.
func (e *Executor) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	switch e.state {
	case stateNew:
		e.state = stateStopping
		close(e.shutdownDone)
		e.mu.Unlock()
		return nil
	case stateStopping:
		e.mu.Unlock()
		select {
		case <-e.shutdownDone:
			return e.shutdownErr
		case <-ctx.Done():
			return fmt.Errorf("xxljob: shutdown: %w", ctx.Err())
		}
	}
	e.state = stateStopping
	e.mu.Unlock()

	e.shutdownErr = e.shutdown(ctx)
	close(e.shutdownDone)
	return e.shutdownErr
}

// Stop is Shutdown under the name a Start/Stop component list expects.
func (e *Executor) Stop(ctx context.Context) error { return e.Shutdown(ctx) }

// shutdown runs the steps of Shutdown in order, each under its own
// deadline, and returns what each could not finish.
func (e *Executor) shutdown(ctx context.Context) error {
	start := time.Now()
	var errs []error
	errs = append(errs, e.deregister(ctx)...)
	// (2) Refuse new triggers, kill the queued ones; idle job threads exit.
	if n := e.runner.close(); n > 0 {
		e.log.InfoContext(ctx, "queued triggers killed", "num_triggers", n)
	}
	errs = append(errs, e.drainRuns(ctx)...)
	errs = append(errs, e.stopBackground(ctx)...)
	errs = append(errs, e.closeServer(ctx)...)
	e.client.close()
	e.log.InfoContext(ctx, "xxl-job executor stopped", "duration", time.Since(start))
	if len(errs) > 0 {
		return fmt.Errorf("xxljob: shutdown: %w", errors.Join(errs...))
	}
	return nil
}

// grace is a fresh deadline for steps that must happen even when ctx is
// already over (they are quick or bounded by the HTTP client timeout).
func (e *Executor) grace(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.cfg.HTTPClientTimeout*time.Duration(len(e.cfg.AdminAddresses))+2*time.Second)
}

// deregister is step (1): fail beats, and deregister after the heartbeat
// stopped so it cannot re-register.
func (e *Executor) deregister(ctx context.Context) []error {
	var errs []error
	e.draining.Store(true)
	e.regCancel()
	rctx, cancel := e.grace(ctx)
	defer cancel()
	if err := e.registryLoops.wait(rctx); err != nil {
		errs = append(errs, fmt.Errorf("registry loop did not stop: %w", err))
	}
	if err := e.client.post(rctx, adminRegistryRemove, e.registryParam()); err != nil {
		e.log.WarnContext(ctx, "registryRemove failed", "error", err)
	} else {
		e.log.InfoContext(ctx, "registryRemove done")
	}
	return errs
}

// drainRuns is step (3): let runs finish, then cancel what is left.
func (e *Executor) drainRuns(ctx context.Context) []error {
	wctx, cancel := context.WithTimeout(ctx, e.cfg.ShutdownTimeout)
	err := e.runner.live.wait(wctx)
	cancel()
	if err == nil {
		return nil
	}
	n := e.runner.stopAll(reasonShutdown)
	e.log.WarnContext(ctx, "shutdown timeout reached, cancelling runs", "num_jobs", n)
	// Stopped job threads report at once without waiting for handlers.
	sctx, cancel := e.grace(ctx)
	defer cancel()
	if err := e.runner.live.wait(sctx); err != nil {
		return []error{fmt.Errorf("job threads did not stop: %w", err)}
	}
	return nil
}

// stopBackground is step (4): stop the sender, spool retry and cleanup,
// then flush what is left. The sender may be in the middle of a delivery:
// wait for it first, so the flush gets a full deadline of its own.
func (e *Executor) stopBackground(ctx context.Context) []error {
	var errs []error
	close(e.stopWork)
	e.workCancel()
	wctx, cancel := e.grace(ctx)
	if err := e.workLoops.wait(wctx); err != nil {
		errs = append(errs, fmt.Errorf("background loops did not stop: %w", err))
	}
	cancel()
	fctx, cancel := e.grace(ctx)
	e.callback.flush(fctx)
	cancel()
	e.callback.spool.close()
	return errs
}

// closeServer is step (5): close the HTTP server, cancel the handlers and
// wait for them.
func (e *Executor) closeServer(ctx context.Context) []error {
	var errs []error
	sctx, cancel := e.grace(ctx)
	if ctx.Err() == nil {
		sctx, cancel = ctx, func() {}
	}
	if err := e.srv.Shutdown(sctx); err != nil {
		_ = e.srv.Close()
	}
	cancel()
	e.baseCancel(errShutdown)
	if err := e.serving.wait(context.WithoutCancel(ctx)); err != nil {
		errs = append(errs, err)
	}
	if err := e.handlers.wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("%d handlers still running after cancellation: %w", e.handlers.count(), err))
	}
	return errs
}
