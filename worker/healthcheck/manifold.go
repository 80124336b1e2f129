package healthcheck

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
	DatabaseName string // a domain.State, which also lists the agents sharing it
	EnvironsName string // an *environ.Set

	AgentID  string        // this agent's id in the agents table
	AgentTTL time.Duration // an agent is live while its last heartbeat is younger

	Interval     time.Duration
	Concurrency  int
	PageSize     int
	CheckTimeout time.Duration

	Logger    *slog.Logger
	Rand      func() float64
	Metrics   Metrics
	Locks     Locks  // shared with the provisioner
	Holder    string // this agent's lease identity, the provisioner's Holder
	NewWorker func(Config) (worker.Worker, error)
}

// Validate reports the first missing field; the worker's Config checks the settings.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.New("health checker manifold: ClockName is required")
	case c.DatabaseName == "":
		return errors.New("health checker manifold: DatabaseName is required")
	case c.EnvironsName == "":
		return errors.New("health checker manifold: EnvironsName is required")
	case c.Logger == nil:
		return errors.New("health checker manifold: Logger is required")
	case c.Rand == nil:
		return errors.New("health checker manifold: Rand is required")
	case c.Metrics == nil:
		return errors.New("health checker manifold: Metrics is required")
	case c.Locks == nil:
		return errors.New("health checker manifold: Locks is required: pass the lock set the provisioner shares")
	case c.Holder == "":
		return errors.New("health checker manifold: Holder is required: pass the provisioner's Holder, this agent's lease identity")
	case c.AgentID == "":
		return errors.New("health checker manifold: AgentID is required: pass this agent's --agent-id")
	case c.AgentTTL <= 0:
		return fmt.Errorf("health checker manifold: AgentTTL must be positive (the agents' --agent-ttl), got %s", c.AgentTTL)
	case c.NewWorker == nil:
		return errors.New("health checker manifold: NewWorker is required")
	}
	return nil
}

func (c ManifoldConfig) inputNames() environs.InputNames {
	return environs.InputNames{Clock: c.ClockName, Database: c.DatabaseName, Environs: c.EnvironsName}
}

// Manifold runs the health checker on the agent's clock, database and provisioner set; the
// database also lists the agents the checks are shared among.
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
				Store:        in.State,
				Environs:     in.Environs,
				Clock:        in.Clock,
				Rand:         config.Rand,
				Logger:       config.Logger,
				Metrics:      config.Metrics,
				Locks:        config.Locks,
				Holder:       config.Holder,
				Agents:       in.State,
				AgentID:      config.AgentID,
				AgentTTL:     config.AgentTTL,
				Interval:     config.Interval,
				Concurrency:  config.Concurrency,
				PageSize:     config.PageSize,
				CheckTimeout: config.CheckTimeout,
			})
			if err != nil {
				return nil, fmt.Errorf("start health checker: %w", err)
			}
			return w, nil
		},
	}
}
