package environcheck

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/environ"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string // a clock.Clock
	EnvironsName string // an *environ.Set

	Logger    *slog.Logger
	Metrics   Metrics
	NewWorker func(Config) (worker.Worker, error)

	// Settings are handed to the worker's Config whole.
	Settings
}

// Validate reports the first missing name or function, or setting that is not valid
// (NotValid).
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.NotValidf("environ checker manifold: empty ClockName")
	case c.EnvironsName == "":
		return errors.NotValidf("environ checker manifold: empty EnvironsName")
	case c.Logger == nil:
		return errors.NotValidf("environ checker manifold: nil Logger")
	case c.Metrics == nil:
		return errors.NotValidf("environ checker manifold: nil Metrics")
	case c.NewWorker == nil:
		return errors.NotValidf("environ checker manifold: nil NewWorker")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("environ checker manifold: %w", err)
	}
	return nil
}

// Manifold runs the environ checker on the agent's clock and provisioner set.
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{config.ClockName, config.EnvironsName},
		Start: func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
			if err := config.Validate(); err != nil {
				return nil, err
			}
			var clk clock.Clock
			if err := getter.Get(config.ClockName, &clk); err != nil {
				return nil, err
			}
			var set *environ.Set
			if err := getter.Get(config.EnvironsName, &set); err != nil {
				return nil, err
			}
			w, err := config.NewWorker(Config{
				Environs: set,
				Clock:    clk,
				Logger:   config.Logger,
				Metrics:  config.Metrics,
				Settings: config.Settings,
			})
			if err != nil {
				return nil, fmt.Errorf("start environ checker: %w", err)
			}
			return w, nil
		},
	}
}
