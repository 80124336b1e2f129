package membership

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/worker/database"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName    string
	DatabaseName string // a database.Hold

	Logger    *slog.Logger
	Metrics   Metrics
	NewWorker func(Config) (worker.Worker, error)
	// Provisioners is handed to the worker's Config (see there); nil records none.
	Provisioners func() []string

	// Settings are handed to the worker's Config whole.
	Settings
}

// Validate reports the first missing name or function, or setting that is not valid
// (NotValid).
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.NotValidf("membership manifold: empty ClockName")
	case c.DatabaseName == "":
		return errors.NotValidf("membership manifold: empty DatabaseName")
	case c.Logger == nil:
		return errors.NotValidf("membership manifold: nil Logger")
	case c.Metrics == nil:
		return errors.NotValidf("membership manifold: nil Metrics")
	case c.NewWorker == nil:
		return errors.NotValidf("membership manifold: nil NewWorker")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("membership manifold: %w", err)
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
				Store:        hold.State,
				Clock:        clk,
				Logger:       config.Logger,
				Metrics:      config.Metrics,
				Provisioners: config.Provisioners,
				Settings:     config.Settings,
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
