// Package changelog runs the worker that keeps the store's logs from growing without bound:
// every Interval it deletes the change-log entries older than Retain, and the resource
// events and capacity samples older than HistoryRetain. A running watcher reads an entry
// within a poll interval of its commit, and a starting one begins from the resources needing
// attention rather than from old entries, so Retain only has to be comfortably longer than
// the watchers' gap timeout. HistoryRetain is how far back `berth resource events` and the
// capacity trend can look.
//
// What is old is decided by the database's clock: the worker hands the store the retention,
// not a cutoff of its own clock, so an agent whose clock is off prunes no entry its peers
// have yet to read. Each prune carries the leadership term the worker runs under, and the
// store applies it only while that term holds: a former leader resuming after a pause
// prunes nothing. The worker's clock only times the rounds.
package changelog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"gopkg.in/tomb.v2"

	"github.com/berth-dev/berth/domain"
)

// Pruner deletes, while a leadership term holds, the log entries written longer ago than a
// retention on the database clock, and says how many went (domain.State is one).
type Pruner interface {
	PruneChanges(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error)
	PruneEvents(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error)
	PruneCapacitySamples(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error)
}

// Config holds what the worker needs: its dependencies, the leadership term it prunes
// under, and its Settings.
type Config struct {
	Pruner Pruner
	Clock  clock.Clock
	Logger *slog.Logger
	Term   domain.Term

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Pruner == nil:
		return errors.NotValidf("change-log pruner: nil Pruner (pass the agent's store)")
	case c.Clock == nil:
		return errors.NotValidf("change-log pruner: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("change-log pruner: nil Logger")
	case c.Term.Holder == "" || c.Term.Session <= 0:
		return errors.NotValidf("change-log pruner: Term %+v (pass the leadership flag's term)", c.Term)
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("change-log pruner: %w", err)
	}
	return nil
}

// pruneWorker prunes every Interval. A failed prune is logged and tried again at the next
// tick: a longer log costs a little disk, never correctness.
type pruneWorker struct {
	tomb   tomb.Tomb
	config Config

	mu   sync.Mutex // guards last, which Report reads
	last map[string]pruned
}

// pruned is the outcome of one table's last prune.
type pruned struct {
	olderThan time.Duration
	rows      int64
	err       string
}

// NewWorker starts a pruning worker.
func NewWorker(config Config) (worker.Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &pruneWorker{config: config, last: make(map[string]pruned)}
	w.tomb.Go(w.loop)
	return w, nil
}

// Kill asks the worker to stop.
func (w *pruneWorker) Kill() { w.tomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *pruneWorker) Wait() error { return w.tomb.Wait() }

// Report shows each table's last prune: its cutoff, how many rows it deleted and its error.
func (w *pruneWorker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	report := map[string]any{
		"interval":       w.config.Interval.String(),
		"retain":         w.config.Retain.String(),
		"history-retain": w.config.HistoryRetain.String(),
	}
	for table, p := range w.last {
		entry := map[string]any{"older-than": p.olderThan.String(), "pruned": p.rows}
		if p.err != "" {
			entry["error"] = p.err
		}
		report[table] = entry
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
			w.prune(ctx, "change-log", w.config.Retain, w.config.Pruner.PruneChanges)
			w.prune(ctx, "resource-events", w.config.HistoryRetain, w.config.Pruner.PruneEvents)
			w.prune(ctx, "capacity-samples", w.config.HistoryRetain, w.config.Pruner.PruneCapacitySamples)
			timer.Reset(w.config.Interval)
		}
	}
}

func (w *pruneWorker) prune(ctx context.Context, table string, olderThan time.Duration, prune func(context.Context, domain.Term, time.Duration) (int64, error)) {
	rows, err := prune(ctx, w.config.Term, olderThan)
	p := pruned{olderThan: olderThan, rows: rows}
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopping: the cancelled prune is not worth a warning.
	case errors.Is(err, domain.ErrNotLeader):
		// Another agent leads now; this worker stops when the leadership flag moves.
		p.err = err.Error()
		w.config.Logger.Debug("not the leader any more; nothing pruned", "table", table, "error", err)
	case err != nil:
		p.err = err.Error()
		w.config.Logger.Warn("pruning failed; trying again next interval",
			"table", table, "error", err, "retry_in", w.config.Interval)
	case rows > 0:
		w.config.Logger.Debug("pruned", "table", table, "rows", rows, "older-than", olderThan)
	}
	w.mu.Lock()
	w.last[table] = p
	w.mu.Unlock()
}
