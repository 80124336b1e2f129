package provisioner

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	"go.opentelemetry.io/otel/trace"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/worker/environs"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string // a clock.Clock
	DatabaseName string // a domain.State, which also lists the agents sharing it
	EnvironsName string // an *environ.Set

	Logger     *slog.Logger
	Rand       func() float64
	Metrics    Metrics
	Locks      Locks // shared with the health checker
	NewWorker  func(Config) (worker.Worker, error)
	NewWatcher func(state domain.State, clk clock.Clock, logger *slog.Logger) (Watcher, error)

	// TracerProvider gets the reconciles' spans; nil is the no-op provider (no traces).
	TracerProvider trace.TracerProvider

	// BreakerMetrics records the provisioners' circuit breakers, which are kept in the
	// database and set per provisioner in the provisioner set; nil turns them off.
	BreakerMetrics BreakerMetrics

	// Settings are handed to the worker's Config whole.
	Settings
}

// Validate reports the first missing name or function, or setting that is not valid
// (NotValid).
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.NotValidf("provisioner manifold: empty ClockName")
	case c.DatabaseName == "":
		return errors.NotValidf("provisioner manifold: empty DatabaseName")
	case c.EnvironsName == "":
		return errors.NotValidf("provisioner manifold: empty EnvironsName")
	case c.Logger == nil:
		return errors.NotValidf("provisioner manifold: nil Logger")
	case c.Rand == nil:
		return errors.NotValidf("provisioner manifold: nil Rand")
	case c.Metrics == nil:
		return errors.NotValidf("provisioner manifold: nil Metrics")
	case c.Locks == nil:
		return errors.NotValidf("provisioner manifold: nil Locks (pass the lock set the health checker shares)")
	case c.NewWorker == nil:
		return errors.NotValidf("provisioner manifold: nil NewWorker")
	case c.NewWatcher == nil:
		return errors.NotValidf("provisioner manifold: nil NewWatcher")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("provisioner manifold: %w", err)
	}
	return nil
}

func (c ManifoldConfig) inputNames() environs.InputNames {
	return environs.InputNames{Clock: c.ClockName, Database: c.DatabaseName, Environs: c.EnvironsName}
}

// Manifold runs the provisioner worker on the agent's clock, database and provisioner set.
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
			var breakers BreakerConfig
			if config.BreakerMetrics != nil {
				breakers = BreakerConfig{Store: in.State, Settings: in.Environs.Breaker, Metrics: config.BreakerMetrics}
			}
			return config.NewWorker(Config{
				State:    in.State,
				Environs: in.Environs,
				NewWatcher: func() (Watcher, error) {
					return config.NewWatcher(in.State, in.Clock, config.Logger)
				},
				Clock:          in.Clock,
				Rand:           config.Rand,
				Logger:         config.Logger,
				Metrics:        config.Metrics,
				Locks:          config.Locks,
				TracerProvider: config.TracerProvider,
				Agents:         in.State,
				Breakers:       breakers,
				Owners:         in.State,
				Settings:       config.Settings,
			})
		},
	}
}
