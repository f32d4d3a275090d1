package main

import (
	"context"
	"log/slog"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/xxljob"
)

// ctxHandler tags process-log records with what their context belongs to:
// job_id and log_id for a line written under an XXL-JOB run's context (the
// closer's page and summary lines, for instance, which know nothing of
// XXL-JOB), trace_id for a line written under a delayed task's. Keys a
// logger already carries (With) or a record already has are not repeated.
type ctxHandler struct {
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

func newCtxHandler(h slog.Handler) slog.Handler { return &ctxHandler{inner: h} }

func (h *ctxHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *ctxHandler) Handle(ctx context.Context, r slog.Record) error {
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

func (h *ctxHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := h.has
	for _, a := range attrs {
		has |= keyBit(a.Key)
	}
	return &ctxHandler{inner: h.inner.WithAttrs(attrs), has: has}
}

func (h *ctxHandler) WithGroup(name string) slog.Handler {
	return &ctxHandler{inner: h.inner.WithGroup(name), has: h.has}
}
