// Package logctx is the process log's slog handler that tags each line
// with what its context belongs to: an XXL-JOB run (job_id, log_id) or a
// delayed task (trace_id). The code that writes those lines (the closer's
// page and summary lines, for instance) knows nothing of either.
package logctx

import (
	"context"
	"log/slog"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/xxljob"
)

// handler tags records with job_id and log_id when written under an
// XXL-JOB run's context, trace_id under a delayed task's. Keys a logger
// already carries (With) or a record already has are not repeated.
type handler struct {
	inner slog.Handler
	has   ctxKeys // keys attached by With
}

type ctxKeys uint8

const (
	hasJobID ctxKeys = 1 << iota
	hasLogID
	hasTraceID
)

func keyBit(k string) ctxKeys {
	switch k {
	case "job_id":
		return hasJobID
	case "log_id":
		return hasLogID
	case "trace_id":
		return hasTraceID
	}
	return 0
}

// NewHandler wraps h so that its records carry the run or task of their
// context.
func NewHandler(h slog.Handler) slog.Handler { return &handler{inner: h} }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	run, isRun := xxljob.RunFromContext(ctx)
	trace := delay.TraceID(ctx)
	if !isRun && trace == "" {
		return h.inner.Handle(ctx, r)
	}
	has := h.has
	r.Attrs(func(a slog.Attr) bool {
		has |= keyBit(a.Key)
		return true
	})
	if isRun {
		if has&hasJobID == 0 {
			r.AddAttrs(slog.Int("job_id", run.JobID))
		}
		if has&hasLogID == 0 {
			r.AddAttrs(slog.Int64("log_id", run.LogID))
		}
	}
	if trace != "" && has&hasTraceID == 0 {
		r.AddAttrs(slog.String("trace_id", trace))
	}
	return h.inner.Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := h.has
	for _, a := range attrs {
		has |= keyBit(a.Key)
	}
	return &handler{inner: h.inner.WithAttrs(attrs), has: has}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(name), has: h.has}
}
