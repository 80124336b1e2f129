// Package changelog runs the worker that keeps the store's change log from growing without
// bound: every Interval it deletes the entries older than Retain. A running watcher reads an
// entry within a poll interval of its commit, and a starting one begins from the resources
// needing attention rather than from old entries, so Retain only has to be comfortably longer
// than the watchers' gap timeout.
package changelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4"
	"gopkg.in/tomb.v2"
)

// Pruner deletes change-log entries written before cutoff and says how many went.
type Pruner interface {
	PruneChanges(ctx context.Context, cutoff time.Time) (int64, error)
}

// Config holds what the worker needs.
type Config struct {
	Pruner Pruner
	Clock  clock.Clock
	Logger *slog.Logger
	// Interval is the time between prunes.
	Interval time.Duration
	// Retain is how long an entry is kept.
	Retain time.Duration
}

// Validate reports the first missing or invalid field.
func (c Config) Validate() error {
	switch {
	case c.Pruner == nil:
		return errors.New("change-log pruner: Pruner is required (pass the agent's store)")
	case c.Clock == nil:
		return errors.New("change-log pruner: Clock is required")
	case c.Logger == nil:
		return errors.New("change-log pruner: Logger is required")
	case c.Interval <= 0:
		return fmt.Errorf("change-log pruner: Interval must be positive, got %s", c.Interval)
	case c.Retain <= 0:
		return fmt.Errorf("change-log pruner: Retain must be positive, got %s", c.Retain)
	}
	return nil
}

// pruneWorker prunes the change log every Interval. A failed prune is logged and tried again at
// the next tick: a longer log costs a little disk, never correctness.
type pruneWorker struct {
	tomb   tomb.Tomb
	config Config

	mu         sync.Mutex // guards the last* fields, which Report reads
	lastCutoff time.Time
	lastPruned int64
	lastError  string
}

// NewWorker starts a pruning worker.
func NewWorker(config Config) (worker.Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &pruneWorker{config: config}
	w.tomb.Go(w.loop)
	return w, nil
}

// Kill asks the worker to stop.
func (w *pruneWorker) Kill() { w.tomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *pruneWorker) Wait() error { return w.tomb.Wait() }

// Report shows the last prune's cutoff, how many entries it deleted and its error, if any.
func (w *pruneWorker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	report := map[string]any{
		"interval": w.config.Interval.String(),
		"retain":   w.config.Retain.String(),
	}
	if !w.lastCutoff.IsZero() {
		report["last-cutoff"] = w.lastCutoff
		report["last-pruned"] = w.lastPruned
	}
	if w.lastError != "" {
		report["last-error"] = w.lastError
	}
	return report
}

func (w *pruneWorker) loop() error {
	ctx := w.tomb.Context(context.Background())
	timer := w.config.Clock.NewTimer(w.config.Interval)
	defer timer.Stop()
	for {
		select {
		case <-w.tomb.Dying():
			return tomb.ErrDying
		case <-timer.Chan():
			w.prune(ctx)
			timer.Reset(w.config.Interval)
		}
	}
}

func (w *pruneWorker) prune(ctx context.Context) {
	cutoff := w.config.Clock.Now().Add(-w.config.Retain)
	pruned, err := w.config.Pruner.PruneChanges(ctx, cutoff)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastCutoff = cutoff
	w.lastPruned = pruned
	w.lastError = ""
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopping: the cancelled prune is not worth a warning.
	case err != nil:
		w.lastError = err.Error()
		w.config.Logger.Warn("pruning the change log failed; trying again next interval",
			"error", err, "retry_in", w.config.Interval)
	case pruned > 0:
		w.config.Logger.Debug("pruned the change log", "entries", pruned, "cutoff", cutoff)
	}
}
