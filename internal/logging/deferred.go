package logging

import (
	"context"
	"log/slog"
	"sync"
)

// Deferred returns a handler that writes what h writes, but hands h the attributes a logger
// is given (Logger.With) only when the logger first writes a line: h formats them then, once.
// The agent makes a logger with its resource's attributes for every attempt, thousands a
// second under a burst, and most of them write nothing at the levels operators run at: the
// text and JSON handlers format attributes as soon as they are given, which was a twentieth
// of the agent's CPU under a burst at the warn level.
func Deferred(h slog.Handler) slog.Handler {
	return &deferred{base: h}
}

// deferred is Deferred's handler: base with attrs not applied yet.
type deferred struct {
	base  slog.Handler
	attrs []slog.Attr

	once    sync.Once
	applied slog.Handler // base with attrs, once a line was written
}

func (d *deferred) Enabled(ctx context.Context, level slog.Level) bool {
	return d.base.Enabled(ctx, level)
}

func (d *deferred) Handle(ctx context.Context, r slog.Record) error {
	return d.handler().Handle(ctx, r)
}

// WithAttrs keeps attrs for the first line written.
func (d *deferred) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return d
	}
	return &deferred{base: d.base, attrs: append(d.attrs[:len(d.attrs):len(d.attrs)], attrs...)}
}

// WithGroup applies the attributes kept so far: they are outside the group.
func (d *deferred) WithGroup(name string) slog.Handler {
	if name == "" {
		return d
	}
	return &deferred{base: d.handler().WithGroup(name)}
}

// handler returns base with the attributes kept applied, applying them the first time.
func (d *deferred) handler() slog.Handler {
	if len(d.attrs) == 0 {
		return d.base
	}
	d.once.Do(func() { d.applied = d.base.WithAttrs(d.attrs) })
	return d.applied
}
