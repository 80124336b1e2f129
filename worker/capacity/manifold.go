package capacity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/worker/environs"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string // a clock.Clock
	DatabaseName string // a domain.State
	EnvironsName string // an *environ.Set

	Interval   time.Duration
	Timeout    time.Duration
	Thresholds Thresholds

	Logger    *slog.Logger
	Observer  Observer // optional
	NewWorker func(Config) (worker.Worker, error)
}

// Validate reports the first missing field; the worker's Config checks the settings.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.New("capacity manifold: ClockName is required")
	case c.DatabaseName == "":
		return errors.New("capacity manifold: DatabaseName is required")
	case c.EnvironsName == "":
		return errors.New("capacity manifold: EnvironsName is required")
	case c.Logger == nil:
		return errors.New("capacity manifold: Logger is required")
	case c.NewWorker == nil:
		return errors.New("capacity manifold: NewWorker is required")
	}
	return nil
}

func (c ManifoldConfig) inputNames() environs.InputNames {
	return environs.InputNames{Clock: c.ClockName, Database: c.DatabaseName, Environs: c.EnvironsName}
}

// Manifold runs the capacity worker on the agent's clock, database and provisioner set.
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: config.inputNames().Inputs(),
		Start: func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
			if err := config.Validate(); err != nil {
				return nil, err
			}
			in, err := config.inputNames().Get(getter)
			if err != nil {
				return nil, err
			}
			w, err := config.NewWorker(Config{
				Store:      in.State,
				Environs:   in.Environs,
				Clock:      in.Clock,
				Logger:     config.Logger,
				Observer:   config.Observer,
				Interval:   config.Interval,
				Timeout:    config.Timeout,
				Thresholds: config.Thresholds,
			})
			if err != nil {
				return nil, fmt.Errorf("start capacity worker: %w", err)
			}
			return w, nil
		},
	}
}
