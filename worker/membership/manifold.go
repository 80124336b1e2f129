package membership

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
	"github.com/berth-dev/berth/worker/database"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string
	DatabaseName string // a database.Hold
	Agent        domain.AgentInfo

	HeartbeatInterval time.Duration
	TTL               time.Duration
	Timeout           time.Duration
	ResignTimeout     time.Duration
	PruneInterval     time.Duration
	PruneAfter        time.Duration

	Logger    *slog.Logger
	Metrics   Metrics
	NewWorker func(Config) (worker.Worker, error)
}

// Validate reports the first missing or invalid field.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.New("membership manifold: ClockName is required")
	case c.DatabaseName == "":
		return errors.New("membership manifold: DatabaseName is required")
	case c.Agent.ID == "":
		return errors.New("membership manifold: Agent.ID is required")
	case c.HeartbeatInterval <= 0:
		return fmt.Errorf("membership manifold: HeartbeatInterval must be positive, got %s", c.HeartbeatInterval)
	case c.TTL <= 0:
		return fmt.Errorf("membership manifold: TTL must be positive, got %s", c.TTL)
	case c.Timeout <= 0:
		return fmt.Errorf("membership manifold: Timeout must be positive, got %s", c.Timeout)
	case c.ResignTimeout <= 0:
		return fmt.Errorf("membership manifold: ResignTimeout must be positive, got %s", c.ResignTimeout)
	case c.PruneInterval <= 0:
		return fmt.Errorf("membership manifold: PruneInterval must be positive, got %s", c.PruneInterval)
	case c.PruneAfter <= 0:
		return fmt.Errorf("membership manifold: PruneAfter must be positive, got %s", c.PruneAfter)
	case c.Logger == nil:
		return errors.New("membership manifold: Logger is required")
	case c.Metrics == nil:
		return errors.New("membership manifold: Metrics is required")
	case c.NewWorker == nil:
		return errors.New("membership manifold: NewWorker is required")
	}
	return nil
}

// Manifold runs the membership worker on the agent's clock and store.
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
			// A hold, not the bare store: the engine stops every worker at once, and the
			// resignation must not find the store closed under it.
			var hold database.Hold
			if err := getter.Get(config.DatabaseName, &hold); err != nil {
				return nil, err
			}
			w, err := config.NewWorker(Config{
				Store:             hold.State,
				Clock:             clk,
				Logger:            config.Logger,
				Metrics:           config.Metrics,
				Agent:             config.Agent,
				HeartbeatInterval: config.HeartbeatInterval,
				TTL:               config.TTL,
				Timeout:           config.Timeout,
				ResignTimeout:     config.ResignTimeout,
				PruneInterval:     config.PruneInterval,
				PruneAfter:        config.PruneAfter,
			})
			if err != nil {
				hold.Release()
				return nil, err
			}
			return &database.ReleasingWorker{Worker: w, Hold: hold}, nil
		},
	}
}

// Registration is the manifold's output: the session the agent is registered under, for
// workers that act in its name (the leadership claim). The engine restarts them when the
// membership worker restarts, which registers a new session.
type Registration interface {
	// Session is the agent's session, 0 until it has registered.
	Session() int64
	// Registered is closed once the agent has registered, so that a worker waiting for a
	// session acts the moment there is one.
	Registered() <-chan struct{}
}

// output gives the worker as a Registration.
func output(in worker.Worker, out any) error {
	w, ok := in.(*database.ReleasingWorker)
	if !ok {
		return fmt.Errorf("membership manifold: expected its own worker, got %T", in)
	}
	reg, ok := w.Worker.(Registration)
	if !ok {
		return fmt.Errorf("membership manifold: worker %T has no session", w.Worker)
	}
	target, ok := out.(*Registration)
	if !ok {
		return fmt.Errorf("membership manifold: expected *membership.Registration, got %T", out)
	}
	*target = reg
	return nil
}
