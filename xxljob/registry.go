package xxljob

import (
	"context"
	"errors"
	"time"
)

func (e *Executor) registryParam() registryParam {
	return registryParam{
		RegistryGroup: registryGroupExecutor,
		RegistryKey:   e.cfg.AppName,
		RegistryValue: e.cfg.Address,
	}
}

// registryLoop registers at once and then every RegistryInterval until ctx
// ends. Each round tries the admins in order and stops at the first that
// accepts (they share one database). Failures are retried next round only:
// the admin forgets an executor 90 s after its last successful beat.
func (e *Executor) registryLoop(ctx context.Context) {
	log := e.cfg.Logger.With("component", "xxljob.registry")
	failing, ok := false, false
	repeat(ctx.Done(), nil, e.cfg.RegistryInterval, func() bool {
		err := e.client.post(ctx, adminRegistry, e.registryParam())
		if ctx.Err() != nil {
			return false // interrupted by Shutdown: not a failure worth reporting
		}
		e.obs.Registered(err)
		var ae *adminError
		switch {
		case err != nil && !failing && errors.As(err, &ae) && (ae.Msg == msgMainAuthInvalid || ae.Msg == msgMainAuthEmpty):
			log.WarnContext(ctx, "registry refused: the admin (the branch after 3.4 keeps a token per executor group) has no executor group "+
				"with this appname and access token; create the group with its token (executor provision does), or set the token the group has",
				"app_name", e.cfg.AppName, "error", err, "interval", e.cfg.RegistryInterval)
		case err != nil && !failing:
			log.WarnContext(ctx, "registry failed, will retry", "error", err, "interval", e.cfg.RegistryInterval)
		case err != nil:
			log.DebugContext(ctx, "registry still failing", "error", err)
		case failing || !ok:
			log.InfoContext(ctx, "registered with admin", "app_name", e.cfg.AppName, "address", e.cfg.Address)
		default:
			log.DebugContext(ctx, "registry succeeded", "address", e.cfg.Address)
		}
		if err == nil && e.callback.spool.pending() > 0 {
			e.callback.signal(e.callback.nudge) // an admin answers: deliver what waits on disk now
		}
		failing, ok = err != nil, ok || err == nil
		return true
	})
}

// cleanupInterval is how often cleanupLoop removes old run log folders.
const cleanupInterval = 24 * time.Hour

// cleanupLoop removes old run log folders at start and every
// cleanupInterval (24 h) until stop closes.
func (e *Executor) cleanupLoop(ctx context.Context, stop <-chan struct{}) {
	if e.cfg.LogRetentionDays < 3 {
		return
	}
	log := e.cfg.Logger.With("component", "xxljob.logcleanup")
	repeat(stop, nil, cleanupInterval, func() bool {
		n, err := e.logs.cleanup(time.Now(), e.cfg.LogRetentionDays)
		if err != nil {
			log.ErrorContext(ctx, "run log cleanup", "num_deleted", n, "error", err)
		} else if n > 0 {
			log.InfoContext(ctx, "run log cleanup", "num_deleted", n, "retention_days", e.cfg.LogRetentionDays)
		}
		return true
	})
}

// repeat calls run at once, then interval after each call, and at once
// when nudge receives (a nil nudge never does), until done closes or run
// returns false.
func repeat(done, nudge <-chan struct{}, interval time.Duration, run func() bool) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		case <-nudge:
			t.Stop()
		}
		if !run() {
			return
		}
		t.Reset(interval)
	}
}
