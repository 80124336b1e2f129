package database

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
)

// ManifoldConfig names the manifold's inputs and carries its settings.
type ManifoldConfig struct {
	ClockName string
	Open      Opener
	Logger    *slog.Logger
	NewWorker func(Config) (worker.Worker, error)

	// Settings are handed to the worker's Config whole.
	Settings
}

// Validate reports the first missing name or function, or setting that is not valid
// (NotValid).
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.NotValidf("database manifold: empty ClockName")
	case c.Open == nil:
		return errors.NotValidf("database manifold: nil Open")
	case c.Logger == nil:
		return errors.NotValidf("database manifold: nil Logger")
	case c.NewWorker == nil:
		return errors.NotValidf("database manifold: nil NewWorker")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("database manifold: %w", err)
	}
	return nil
}

// Manifold runs the database worker; its output is the open store as a domain.State, a
// database.DB, or a database.Hold that keeps it open until released.
//
// Start returns the worker only once it has connected, so that the engine registers it, and
// bounces its dependents, when there is a store to hand them: until then they see
// dependency.ErrMissing. The worker connects in its own loop, so the wait ends as soon as the
// engine cancels the start, and a failure to connect is the worker's error.
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{config.ClockName},
		Start: func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
			if err := config.Validate(); err != nil {
				return nil, err
			}
			var clk clock.Clock
			if err := getter.Get(config.ClockName, &clk); err != nil {
				return nil, err
			}
			w, err := config.NewWorker(Config{
				Open:     config.Open,
				Clock:    clk,
				Logger:   config.Logger,
				Settings: config.Settings,
			})
			if err != nil {
				return nil, err
			}
			return awaitConnected(ctx, w)
		},
		Output: output,
	}
}

// NewManifoldWorker adapts NewWorker to ManifoldConfig.NewWorker.
func NewManifoldWorker(config Config) (worker.Worker, error) {
	return NewWorker(config)
}

// awaitConnected returns w once it has connected; if w dies first it returns w's error, and if
// ctx ends first it stops w and returns ctx's error. A worker other than *Worker (a test's) is
// returned as it is.
func awaitConnected(ctx context.Context, w worker.Worker) (worker.Worker, error) {
	dw, ok := w.(*Worker)
	if !ok {
		return w, nil
	}
	select {
	case <-dw.connected:
		return w, nil
	case <-dw.catacomb.Dying():
		if err := dw.Wait(); err != nil {
			return nil, err
		}
		return nil, errors.New("database: the worker stopped before connecting")
	case <-ctx.Done():
		dw.Kill()
		_ = dw.Wait()
		return nil, ctx.Err()
	}
}

func output(in worker.Worker, out any) error {
	w, ok := in.(*Worker)
	if !ok {
		return fmt.Errorf("database manifold: expected *database.Worker, got %T", in)
	}
	db, err := w.store()
	if err != nil {
		return err
	}
	switch out := out.(type) {
	case *domain.State:
		*out = db
	case *DB:
		*out = db
	case *Hold:
		h, err := w.hold()
		if err != nil {
			return err
		}
		*out = h
	default:
		return fmt.Errorf("database manifold: cannot output into %T (want *domain.State, *database.DB or *database.Hold)", out)
	}
	return nil
}
