// Package schemaguard runs the worker that keeps an agent off a database schema newer than
// its build knows. A newer build migrates the database while this agent still runs in every
// rolling update (the new pod migrates as it starts) and on a rollback; this build's idea of
// the tables is then out of date, and whatever it decided about a resource could be wrong
// (an older build once deleted a paused resource, pausing being newer than it).
//
// The store fences the writes that decide what happens to a resource (claims, progress,
// finalized deletes, the leadership claim) in their own statements, so none applies after
// the newer migration commits. This worker makes the agent stop trying and say so: it checks
// the schema at start and every Interval, and while the schema is too new it does not run.
// The workers that do the agent's work (the provisioner, the health checker, the leadership
// flag and what it gates) take it as an input (see Gate), so the engine stops them with it,
// and /readyz names it as not started, with its error: the versions and the fix. The agent
// stays up, registered (berth agents shows it behind) and answering on its HTTP address,
// until it is replaced by a build that knows the schema.
//
//	start: check ──► too new: fail with the SchemaTooNewError (the engine retries, backing off)
//	                 └► else run: check every Interval ──► too new: log, stop with the error
package schemaguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/juju/clock"
	jujuerrors "github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/catacomb"

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

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	// Interval is the time between checks (the heartbeat interval): how long at most a
	// newer schema goes unnoticed by the workers, whose writes the store refuses meanwhile.
	Interval time.Duration
	// Timeout bounds each check.
	Timeout time.Duration
}

// Validate reports the first setting that is not valid (NotValid), naming it.
func (s Settings) Validate() error {
	switch {
	case s.Interval <= 0:
		return jujuerrors.NotValidf("Interval %s (must be positive)", s.Interval)
	case s.Timeout <= 0:
		return jujuerrors.NotValidf("Timeout %s (must be positive)", s.Timeout)
	}
	return nil
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

// Worker runs while the schema is one the build knows; see the package doc.
type Worker struct {
	catacomb catacomb.Catacomb
	config   Config

	mu        sync.Mutex // guards what Report reads
	versions  domain.SchemaVersions
	lastError string
}

// NewWorker checks the schema once and starts the worker, or gives the check's
// *domain.SchemaTooNewError when the schema is too new. A check that fails otherwise (the
// database is slow) does not keep the worker from starting: the store's fence holds
// meanwhile, and the next check decides.
func NewWorker(config Config) (*Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &Worker{config: config}
	if err := w.check(context.Background()); errors.Is(err, domain.ErrSchemaTooNew) {
		return nil, err
	}
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Kill asks the worker to stop.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop and returns why it stopped.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Report shows the schema versions of the last check, and its error if it failed.
func (w *Worker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	report := map[string]any{"known": w.versions.Known, "database": w.versions.Database}
	if w.lastError != "" {
		report["check-error"] = w.lastError
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
			if err := w.check(ctx); errors.Is(err, domain.ErrSchemaTooNew) {
				return err
			}
		}
	}
}

// check reads the schema versions, bounded by Timeout, and logs what is wrong: a schema
// too new (its error is returned), or a check that failed.
func (w *Worker) check(parent context.Context) error {
	ctx, cancel := clocktimeout.WithTimeout(parent, w.config.Clock, w.config.Timeout)
	defer cancel()
	versions, err := w.config.Store.CheckSchema(ctx)
	w.mu.Lock()
	w.versions, w.lastError = versions, ""
	if err != nil {
		w.lastError = err.Error()
	}
	w.mu.Unlock()
	switch {
	case errors.Is(err, domain.ErrSchemaTooNew):
		w.config.Logger.Error("the database's schema is newer than this agent knows: it claims no work until it is replaced",
			"error", err, "known-schema", versions.Known, "database-schema", versions.Database)
	case err != nil && parent.Err() == nil:
		w.config.Logger.Warn("checking the schema version failed; checking again at the next interval", "error", err, "retry_in", w.config.Interval)
	}
	return err
}

var _ worker.Worker = (*Worker)(nil)
