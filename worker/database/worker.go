// Package database runs the agent's connection to its store, keeps checking it, and hands it
// to the workers that need it. When the store stays unreachable the worker dies, so the
// dependency engine bounces every worker that depends on it and starts them again, with
// backoff, once the store is back.
//
// The engine stops every worker at once when the agent stops, so a worker that must still
// write as it stops (the membership worker resigns the agent) takes a Hold: the store is
// closed once the database worker has stopped and every Hold is released.
package database

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/catacomb"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/clocktimeout"
)

// DB is a store with the housekeeping the agent needs at start and while it runs.
type DB interface {
	domain.State
	Migrate(ctx context.Context) error
	Ping(ctx context.Context) error
}

// Opener connects to the store at url.
type Opener func(ctx context.Context, url string) (DB, error)

// Config holds what the worker needs: its dependencies, and its Settings.
type Config struct {
	Open   Opener
	Clock  clock.Clock
	Logger *slog.Logger

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Open == nil:
		return errors.NotValidf("database: nil Open")
	case c.Clock == nil:
		return errors.NotValidf("database: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("database: nil Logger")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// Worker owns one open store. It connects in its loop, so that a Kill while the store is
// unreachable stops it at once; connected is closed once the store is open and migrated.
type Worker struct {
	catacomb  catacomb.Catacomb
	config    Config
	connected chan struct{}
	// failures is written by the loop and read by Report, from the engine's goroutine.
	failures atomic.Int64
	// identity is the store's, read once connected; nil for a store that has none.
	identity atomic.Pointer[domain.DatabaseIdentity]

	mu    sync.Mutex // guards db and holds
	db    DB         // set once connected
	holds int        // the worker's own, while it runs connected, and each unreleased Hold
}

// Hold is the open store, kept open for its holder until Release, however the database
// worker ends.
type Hold struct {
	State   domain.State
	release func()
}

// NewHold is a Hold on state that calls release once, at the first Release: for a store
// held some other way (a test's).
func NewHold(state domain.State, release func()) Hold {
	var once sync.Once
	return Hold{State: state, release: func() { once.Do(release) }}
}

// Release lets the store close once nothing else holds it; calling it again does nothing.
func (h Hold) Release() { h.release() }

// ReleasingWorker is a worker that uses a Hold and releases it once the worker has stopped,
// so that what the worker does as it stops still finds the store open.
type ReleasingWorker struct {
	worker.Worker
	Hold Hold
}

// Wait waits for the worker to stop and then releases the store.
func (w *ReleasingWorker) Wait() error {
	err := w.Worker.Wait()
	w.Hold.Release()
	return err
}

// Report is the wrapped worker's report, if it has one.
func (w *ReleasingWorker) Report() map[string]any {
	if r, ok := w.Worker.(interface{ Report() map[string]any }); ok {
		return r.Report()
	}
	return nil
}

// hold takes a Hold on the store; it fails once the store is closed.
func (w *Worker) hold() (Hold, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holds == 0 {
		return Hold{}, errors.New("database: the store is closed")
	}
	w.holds++
	return NewHold(w.db, w.release), nil
}

// release gives up one hold and closes the store with the last.
func (w *Worker) release() {
	w.mu.Lock()
	w.holds--
	last := w.holds == 0
	db := w.db
	w.mu.Unlock()
	if last {
		db.Close()
	}
}

// store is the open store, or dependency.ErrMissing until the worker has connected.
func (w *Worker) store() (DB, error) {
	select {
	case <-w.connected:
		return w.db, nil
	default:
		return nil, fmt.Errorf("database: not connected yet: %w", dependency.ErrMissing)
	}
}

// NewWorker starts a worker that connects, brings the schema up to date and then keeps
// checking the connection. A schema newer than the build knows is left as it is, and the
// store handed on all the same (see worker/schemaguard).
func NewWorker(config Config) (*Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &Worker{config: config, connected: make(chan struct{})}
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Kill asks the worker to stop.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop and returns why it stopped.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Report shows the connection's health in the engine report, and which database it is
// once connected.
func (w *Worker) Report() map[string]any {
	report := map[string]any{"consecutive-ping-failures": w.failures.Load()}
	if id := w.identity.Load(); id != nil {
		report[domain.IdentityReportID] = id.ID
		report[domain.IdentityReportWhere] = id.Where
	}
	return report
}

func (w *Worker) loop() error {
	db, err := w.connect()
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.db, w.holds = db, 1
	w.mu.Unlock()
	close(w.connected)
	defer w.release()
	for {
		select {
		case <-w.catacomb.Dying():
			return w.catacomb.ErrDying()
		case <-w.config.Clock.After(w.config.PingInterval):
			if err := w.ping(); err != nil {
				return err
			}
		}
	}
}

// connect opens the store and migrates it within ConnectTimeout on the worker's clock, and
// gives up as soon as the worker is killed.
func (w *Worker) connect() (DB, error) {
	ctx, cancel := clocktimeout.WithTimeout(w.catacomb.Context(context.Background()), w.config.Clock, w.config.ConnectTimeout)
	defer cancel()
	db, err := w.config.Open(ctx, w.config.URL)
	if err != nil {
		return nil, w.connectError(ctx, "open database", err)
	}
	err = db.Migrate(ctx)
	if err == nil || errors.Is(err, domain.ErrSchemaTooNew) {
		w.readIdentity(ctx, db)
	}
	switch {
	case errors.Is(err, domain.ErrSchemaTooNew):
		// A newer build migrated the database. The store stays open for the agent's
		// membership and its endpoints; the schema guard holds every worker that would
		// act on the resources back, and the store's writes refuse meanwhile.
		w.config.Logger.Warn("not migrating the database: its schema is newer than this build knows", "error", err)
	case err != nil:
		db.Close()
		return nil, w.connectError(ctx, "migrate database", err)
	}
	return db, nil
}

// readIdentity keeps the store's identity for Report. A store without one, or one that
// cannot read it, is reported without: the agent works all the same, and `berth status`
// says it could not check the database.
func (w *Worker) readIdentity(ctx context.Context, db DB) {
	store, ok := db.(domain.IdentityStore)
	if !ok {
		return
	}
	id, err := store.DatabaseIdentity(ctx)
	if err != nil {
		w.config.Logger.Warn("the database's identity is not in the engine report: berth status cannot check it is its own database", "error", err)
		return
	}
	w.identity.Store(&id)
}

// connectError says why connecting failed: the worker was killed (the catacomb's error), the
// connect timeout ran out, or the store's own error.
func (w *Worker) connectError(ctx context.Context, what string, err error) error {
	select {
	case <-w.catacomb.Dying():
		return w.catacomb.ErrDying()
	default:
	}
	if cause := context.Cause(ctx); errors.Is(cause, clocktimeout.ErrTimedOut) {
		return fmt.Errorf("%s: %w: %w", what, cause, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (w *Worker) ping() error {
	ctx, cancel := context.WithTimeout(w.catacomb.Context(context.Background()), w.config.PingTimeout)
	defer cancel()
	err := w.db.Ping(ctx)
	if err == nil {
		if before := w.failures.Swap(0); before > 0 {
			w.config.Logger.Info("database reachable again", "after-failures", before)
		}
		return nil
	}
	failures := w.failures.Add(1)
	if failures >= int64(w.config.MaxPingFailures) {
		return fmt.Errorf("database unreachable after %d checks: %w", failures, err)
	}
	w.config.Logger.Warn("database check failed", "failures", failures, "err", err)
	return nil
}
