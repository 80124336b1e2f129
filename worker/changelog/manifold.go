package changelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string
	DatabaseName string
	Interval     time.Duration
	Retain       time.Duration
	// HistoryRetain is how long resource events and capacity samples are kept.
	HistoryRetain time.Duration
	Logger        *slog.Logger
	NewWorker     func(Config) (worker.Worker, error)
}

// Validate reports the first missing or invalid field.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.New("change-log pruner manifold: ClockName is required")
	case c.DatabaseName == "":
		return errors.New("change-log pruner manifold: DatabaseName is required")
	case c.Interval <= 0:
		return fmt.Errorf("change-log pruner manifold: Interval must be positive, got %s", c.Interval)
	case c.Retain <= 0:
		return fmt.Errorf("change-log pruner manifold: Retain must be positive, got %s", c.Retain)
	case c.HistoryRetain <= 0:
		return fmt.Errorf("change-log pruner manifold: HistoryRetain must be positive, got %s", c.HistoryRetain)
	case c.Logger == nil:
		return errors.New("change-log pruner manifold: Logger is required")
	case c.NewWorker == nil:
		return errors.New("change-log pruner manifold: NewWorker is required")
	}
	return nil
}

// Manifold runs the pruner of the change log, resource events and capacity samples on the
// agent's clock and store.
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
				Pruner:   state,
				Clock:    clk,
				Logger:   config.Logger,
				Interval: config.Interval,
				Retain:   config.Retain,

				HistoryRetain: config.HistoryRetain,
			})
		},
	}
}
