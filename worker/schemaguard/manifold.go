package schemaguard

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

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string // a clock.Clock
	DatabaseName string // a domain.State

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
		return errors.NotValidf("schema guard manifold: empty ClockName")
	case c.DatabaseName == "":
		return errors.NotValidf("schema guard manifold: empty DatabaseName")
	case c.Logger == nil:
		return errors.NotValidf("schema guard manifold: nil Logger")
	case c.NewWorker == nil:
		return errors.NotValidf("schema guard manifold: nil NewWorker")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("schema guard manifold: %w", err)
	}
	return nil
}

// Manifold runs the schema guard on the agent's clock and store. It has no output: the
// workers it guards only need it to be running (Gate).
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{config.ClockName, config.DatabaseName},
		Start: func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
			if err := config.Validate(); err != nil {
				return nil, err
			}
			var clk clock.Clock
			if err := getter.Get(config.ClockName, &clk); err != nil {
				return nil, err
			}
			var state domain.State
			if err := getter.Get(config.DatabaseName, &state); err != nil {
				return nil, err
			}
			return config.NewWorker(Config{
				Store:    state,
				Clock:    clk,
				Logger:   config.Logger,
				Settings: config.Settings,
			})
		},
	}
}

// NewManifoldWorker is NewWorker as ManifoldConfig.NewWorker takes it.
func NewManifoldWorker(config Config) (worker.Worker, error) {
	w, err := NewWorker(config)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Gate makes manifold start only while the schema guard named guardName runs: it takes the
// guard as one more input, and the engine stops the manifold's worker when the guard stops
// (the schema became too new) and starts it again once the guard runs.
func Gate(guardName string, manifold dependency.Manifold) dependency.Manifold {
	start := manifold.Start
	manifold.Inputs = append(append([]string(nil), manifold.Inputs...), guardName)
	manifold.Start = func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
		if err := getter.Get(guardName, nil); err != nil {
			return nil, err
		}
		return start(ctx, getter)
	}
	return manifold
}
