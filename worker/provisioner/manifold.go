package provisioner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	"go.opentelemetry.io/otel/trace"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/worker/environs"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string // a clock.Clock
	DatabaseName string // a domain.State
	EnvironsName string // an *environ.Set

	Holder           string
	Concurrency      int
	AwaitConcurrency int
	LeaseTTL         time.Duration
	ReconcileTimeout time.Duration
	BackoffBase      time.Duration
	BackoffMax       time.Duration
	CapacityRetry    time.Duration
	AgentTTL         time.Duration // the agents' --agent-ttl
	ShareGrace       time.Duration // how long a changed resource is left to its owner (see Config)

	Logger     *slog.Logger
	Rand       func() float64
	Metrics    Metrics
	Locks      Locks // shared with the health checker
	NewWorker  func(Config) (worker.Worker, error)
	NewWatcher func(state domain.State, clk clock.Clock, logger *slog.Logger) (Watcher, error)

	// TracerProvider gets the reconciles' spans; nil is the no-op provider (no traces).
	TracerProvider trace.TracerProvider
}

// Validate reports the first missing field. The worker's Config checks how the settings
// relate to each other.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.New("provisioner manifold: ClockName is required")
	case c.DatabaseName == "":
		return errors.New("provisioner manifold: DatabaseName is required")
	case c.EnvironsName == "":
		return errors.New("provisioner manifold: EnvironsName is required")
	case c.Holder == "":
		return errors.New("provisioner manifold: Holder is required: set it to this agent's identity (e.g. its host name)")
	case c.Concurrency < 1:
		return fmt.Errorf("provisioner manifold: Concurrency must be at least 1, got %d", c.Concurrency)
	case c.AwaitConcurrency < 1:
		return fmt.Errorf("provisioner manifold: AwaitConcurrency must be at least 1, got %d", c.AwaitConcurrency)
	case c.LeaseTTL <= 0:
		return errors.New("provisioner manifold: LeaseTTL is required")
	case c.ReconcileTimeout <= 0:
		return errors.New("provisioner manifold: ReconcileTimeout is required")
	case c.BackoffBase <= 0:
		return errors.New("provisioner manifold: BackoffBase is required")
	case c.BackoffMax <= 0:
		return errors.New("provisioner manifold: BackoffMax is required")
	case c.CapacityRetry <= 0:
		return errors.New("provisioner manifold: CapacityRetry is required")
	case c.AgentTTL <= 0:
		return errors.New("provisioner manifold: AgentTTL is required: pass the agents' --agent-ttl")
	case c.ShareGrace <= 0:
		return errors.New("provisioner manifold: ShareGrace is required: pass the agents' --heartbeat-interval")
	case c.Logger == nil:
		return errors.New("provisioner manifold: Logger is required")
	case c.Rand == nil:
		return errors.New("provisioner manifold: Rand is required")
	case c.Metrics == nil:
		return errors.New("provisioner manifold: Metrics is required")
	case c.Locks == nil:
		return errors.New("provisioner manifold: Locks is required: pass the lock set the health checker shares")
	case c.NewWorker == nil:
		return errors.New("provisioner manifold: NewWorker is required")
	case c.NewWatcher == nil:
		return errors.New("provisioner manifold: NewWatcher is required")
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
			return config.NewWorker(Config{
				State:    in.State,
				Environs: in.Environs,
				NewWatcher: func() (Watcher, error) {
					return config.NewWatcher(in.State, in.Clock, config.Logger)
				},
				Clock:            in.Clock,
				Rand:             config.Rand,
				Logger:           config.Logger,
				Metrics:          config.Metrics,
				Locks:            config.Locks,
				TracerProvider:   config.TracerProvider,
				Holder:           config.Holder,
				Concurrency:      config.Concurrency,
				AwaitConcurrency: config.AwaitConcurrency,
				LeaseTTL:         config.LeaseTTL,
				ReconcileTimeout: config.ReconcileTimeout,
				BackoffBase:      config.BackoffBase,
				BackoffMax:       config.BackoffMax,
				CapacityRetry:    config.CapacityRetry,
				Agents:           in.State,
				AgentTTL:         config.AgentTTL,
				ShareGrace:       config.ShareGrace,
			})
		},
	}
}
