// Package logging adapts log/slog to the loggers Berth's libraries expect, and keeps the
// agent's many short-lived loggers cheap (Deferred).
package logging

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LevelTrace is below debug: the dependency engine's chatter about every start and stop.
const LevelTrace = slog.LevelDebug - 4

// EngineLogger adapts a slog.Logger to the dependency engine's printf-style Logger.
type EngineLogger struct {
	Logger *slog.Logger
}

func (l EngineLogger) log(level slog.Level, format string, args ...any) {
	if !l.Logger.Enabled(context.Background(), level) {
		return
	}
	l.Logger.Log(context.Background(), level, fmt.Sprintf(format, args...))
}

// Tracef logs at LevelTrace.
func (l EngineLogger) Tracef(format string, args ...any) { l.log(LevelTrace, format, args...) }

// Debugf logs at debug level.
func (l EngineLogger) Debugf(format string, args ...any) { l.log(slog.LevelDebug, format, args...) }

// Infof logs at info level.
func (l EngineLogger) Infof(format string, args ...any) { l.log(slog.LevelInfo, format, args...) }

// Errorf logs at error level.
func (l EngineLogger) Errorf(format string, args ...any) { l.log(slog.LevelError, format, args...) }

// WithSpan returns logger with the trace_id and span_id of ctx's span, so that the lines it
// logs can be found from the span and the span from them. Without a recording span (traces
// off) it returns logger as it is.
func WithSpan(ctx context.Context, logger *slog.Logger) *slog.Logger {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return logger
	}
	return logger.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
}
