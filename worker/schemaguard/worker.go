// Package schemaguard runs the flag worker that keeps an agent off a database schema newer
// than its build knows. A newer build migrates the database while this agent still runs in
// every rolling update (the new pod migrates as it starts) and on a rollback; this build's
// idea of the tables is then out of date, and whatever it decided about a resource could be
// wrong (an older build once deleted a paused resource, pausing being newer than it).
//
// The store fences the writes that decide what happens to a resource (claims, progress,
// finalized deletes, the leadership claim) in their own statements, so none applies once the
// newer migration has committed. This worker makes the agent stop trying, and say so. Its
// flag says the schema is one the build knows; the workers that do the agent's work (the
// provisioner, the health checker, the leadership flag and what it gates) are gated on it
// (see Gate), so while it is false the engine does not run them. A false flag is logged,
// reported not ready (/readyz fails with the versions and the fix), and the agent stays
// up, registered (berth agents shows it behind) and answering on its HTTP address, until it
// is replaced by a build that knows the schema.
//
// The worker checks at start, before it returns, so its flag is fixed for its lifetime; it
// then checks every Interval and, when the schema says otherwise than the flag, stops with
// dependency.ErrBounce: the engine starts it again at once with the new flag, and stops or
// starts the gated workers with it.
//
//	start ──► check ──► flag fixed ──► check every Interval ──► flag no longer right
//	                                                            └──► ErrBounce (restart)
package schemaguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/juju/clock"
	jujuerrors "github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/catacomb"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/clocktimeout"
)

// Store is the part of domain.State the worker uses.
type Store interface {
	CheckSchema(ctx context.Context) (domain.SchemaVersions, error)
}

// Config holds what the worker needs: its dependencies and its Settings.
type Config struct {
	Store  Store
	Clock  clock.Clock
	Logger *slog.Logger

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return jujuerrors.NotValidf("schema guard: nil Store (pass the agent's store)")
	case c.Clock == nil:
		return jujuerrors.NotValidf("schema guard: nil Clock")
	case c.Logger == nil:
		return jujuerrors.NotValidf("schema guard: nil Logger")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("schema guard: %w", err)
	}
	return nil
}

// Flag is the worker's output: whether the schema is one the build knows.
type Flag interface {
	Check() bool
}

// Worker holds the flag; see the package doc.
type Worker struct {
	catacomb catacomb.Catacomb
	config   Config
	known    bool  // the flag, fixed for the worker's lifetime
	tooNew   error // the check's error when the schema is too new

	mu        sync.Mutex // guards what Report reads
	versions  domain.SchemaVersions
	lastError string
	checks    int // checks made, the first by NewWorker
}

// NewWorker checks the schema once and starts the worker with the outcome as its flag. A
// check that fails otherwise than with a schema too new (the database is slow) leaves the
// flag true: the store's fence holds meanwhile, and the next check decides.
func NewWorker(config Config) (*Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &Worker{config: config}
	if err := w.check(context.Background()); errors.Is(err, domain.ErrSchemaTooNew) {
		w.tooNew = err
		config.Logger.Error("the database's schema is newer than this agent knows: it claims no work until it is replaced",
			"error", err, "known-schema", w.versions.Known, "database-schema", w.versions.Database)
	}
	w.known = w.tooNew == nil
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Check says whether the schema is one the build knows.
func (w *Worker) Check() bool { return w.known }

// Kill asks the worker to stop.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop and returns why it stopped.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Report shows the schema versions of the last check, and its error if it failed. While
// the flag is false it says why under "not-ready", the key /readyz reads (see
// worker/httpserver).
func (w *Worker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	report := map[string]any{"known": w.versions.Known, "database": w.versions.Database, "schema-known": w.known, "checks": w.checks}
	if w.lastError != "" {
		report["check-error"] = w.lastError
	}
	if w.tooNew != nil {
		report["not-ready"] = w.tooNew.Error()
	}
	return report
}

func (w *Worker) loop() error {
	ctx := w.catacomb.Context(context.Background())
	timer := w.config.Clock.NewTimer(w.config.Interval)
	defer timer.Stop()
	for {
		select {
		case <-w.catacomb.Dying():
			return w.catacomb.ErrDying()
		case <-timer.Chan():
			timer.Reset(w.config.Interval)
			err := w.check(ctx)
			tooNew := errors.Is(err, domain.ErrSchemaTooNew)
			if (err == nil || tooNew) && tooNew == w.known {
				// The next worker logs the change with its flag.
				return dependency.ErrBounce
			}
		}
	}
}

// check reads the schema versions, bounded by Timeout, and logs a check that failed.
func (w *Worker) check(parent context.Context) error {
	ctx, cancel := clocktimeout.WithTimeout(parent, w.config.Clock, w.config.Timeout)
	defer cancel()
	versions, err := w.config.Store.CheckSchema(ctx)
	w.mu.Lock()
	w.versions, w.lastError = versions, ""
	w.checks++
	if err != nil && !errors.Is(err, domain.ErrSchemaTooNew) {
		w.lastError = err.Error()
	}
	w.mu.Unlock()
	if err != nil && !errors.Is(err, domain.ErrSchemaTooNew) && parent.Err() == nil {
		w.config.Logger.Warn("checking the schema version failed; checking again at the next interval", "error", err, "retry_in", w.config.Interval)
	}
	return err
}

var _ worker.Worker = (*Worker)(nil)
