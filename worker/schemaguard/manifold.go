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

// Manifold runs the schema guard on the agent's clock and store; its output is a Flag.
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{config.ClockName, config.DatabaseName},
		Output: output,
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

// Gate makes manifold start only while the schema is one the build knows: it takes the
// guard's flag, named guardName, as one more input and, while the flag is false, its Start
// reports dependency.ErrMissing. The engine restarts it whenever the guard restarts, which
// it does when its flag changes.
func Gate(guardName string, manifold dependency.Manifold) dependency.Manifold {
	start := manifold.Start
	manifold.Inputs = append(append([]string(nil), manifold.Inputs...), guardName)
	manifold.Start = func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
		var flag Flag
		if err := getter.Get(guardName, &flag); err != nil {
			return nil, err
		}
		if !flag.Check() {
			return nil, fmt.Errorf("the database's schema is newer than this build knows: %w", dependency.ErrMissing)
		}
		return start(ctx, getter)
	}
	return manifold
}

// output gives the worker as a Flag.
func output(in worker.Worker, out any) error {
	flag, ok := in.(Flag)
	if !ok {
		return fmt.Errorf("schema guard manifold: expected a Flag worker, got %T", in)
	}
	target, ok := out.(*Flag)
	if !ok {
		return fmt.Errorf("schema guard manifold: expected *schemaguard.Flag, got %T", out)
	}
	*target = flag
	return nil
}
