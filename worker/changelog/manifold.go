package changelog

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/worker/leadership"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName      string
	DatabaseName   string
	LeadershipName string // a leadership.Flag: the term the prunes carry
	Logger         *slog.Logger
	NewWorker      func(Config) (worker.Worker, error)

	// Settings are handed to the worker's Config whole.
	Settings
}

// Validate reports the first missing name or function, or setting that is not valid
// (NotValid).
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.NotValidf("change-log pruner manifold: empty ClockName")
	case c.DatabaseName == "":
		return errors.NotValidf("change-log pruner manifold: empty DatabaseName")
	case c.LeadershipName == "":
		return errors.NotValidf("change-log pruner manifold: empty LeadershipName")
	case c.Logger == nil:
		return errors.NotValidf("change-log pruner manifold: nil Logger")
	case c.NewWorker == nil:
		return errors.NotValidf("change-log pruner manifold: nil NewWorker")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("change-log pruner manifold: %w", err)
	}
	return nil
}

// Manifold runs the pruner of the change log, resource events and capacity samples on the
// agent's clock and store.
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{config.ClockName, config.DatabaseName, config.LeadershipName},
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
			term, err := leadership.TermOf(getter, config.LeadershipName)
			if err != nil {
				return nil, err
			}
			return config.NewWorker(Config{
				Pruner:   state,
				Clock:    clk,
				Logger:   config.Logger,
				Term:     term,
				Settings: config.Settings,
			})
		},
	}
}
