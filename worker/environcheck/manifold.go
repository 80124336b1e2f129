package environcheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/environ"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string // a clock.Clock
	EnvironsName string // an *environ.Set

	Interval     time.Duration
	CheckTimeout time.Duration

	Logger    *slog.Logger
	Metrics   Metrics
	NewWorker func(Config) (worker.Worker, error)
}

// Validate reports the first missing field; the worker's Config checks the settings.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.New("environ checker manifold: ClockName is required")
	case c.EnvironsName == "":
		return errors.New("environ checker manifold: EnvironsName is required")
	case c.Logger == nil:
		return errors.New("environ checker manifold: Logger is required")
	case c.Metrics == nil:
		return errors.New("environ checker manifold: Metrics is required")
	case c.NewWorker == nil:
		return errors.New("environ checker manifold: NewWorker is required")
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
				Environs:     set,
				Clock:        clk,
				Logger:       config.Logger,
				Metrics:      config.Metrics,
				Interval:     config.Interval,
				CheckTimeout: config.CheckTimeout,
			})
			if err != nil {
				return nil, fmt.Errorf("start environ checker: %w", err)
			}
			return w, nil
		},
	}
}
