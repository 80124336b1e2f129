package capacity

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/worker/environs"
	"github.com/berth-dev/berth/worker/leadership"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string // a clock.Clock
	DatabaseName string // a domain.State
	EnvironsName string // an *environ.Set
	// LeadershipName is a leadership.Flag: the term the worker's writes carry.
	LeadershipName string

	Logger    *slog.Logger
	Observer  Observer // optional
	NewWorker func(Config) (worker.Worker, error)

	// Settings are handed to the worker's Config whole.
	Settings
}

// Validate reports the first missing name or function, or setting that is not valid
// (NotValid).
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.NotValidf("capacity manifold: empty ClockName")
	case c.DatabaseName == "":
		return errors.NotValidf("capacity manifold: empty DatabaseName")
	case c.EnvironsName == "":
		return errors.NotValidf("capacity manifold: empty EnvironsName")
	case c.LeadershipName == "":
		return errors.NotValidf("capacity manifold: empty LeadershipName")
	case c.Logger == nil:
		return errors.NotValidf("capacity manifold: nil Logger")
	case c.NewWorker == nil:
		return errors.NotValidf("capacity manifold: nil NewWorker")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("capacity manifold: %w", err)
	}
	return nil
}

func (c ManifoldConfig) inputNames() environs.InputNames {
	return environs.InputNames{Clock: c.ClockName, Database: c.DatabaseName, Environs: c.EnvironsName}
}

// Manifold runs the capacity worker on the agent's clock, database and provisioner set.
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: append(config.inputNames().Inputs(), config.LeadershipName),
		Start: func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
			if err := config.Validate(); err != nil {
				return nil, err
			}
			in, err := config.inputNames().Get(getter)
			if err != nil {
				return nil, err
			}
			term, err := leadership.TermOf(getter, config.LeadershipName)
			if err != nil {
				return nil, err
			}
			w, err := config.NewWorker(Config{
				Store:    in.State,
				Environs: in.Environs,
				Clock:    in.Clock,
				Logger:   config.Logger,
				Observer: config.Observer,
				Term:     term,
				Settings: config.Settings,
			})
			if err != nil {
				return nil, fmt.Errorf("start capacity worker: %w", err)
			}
			return w, nil
		},
	}
}
