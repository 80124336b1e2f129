package environs

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// ManifoldConfig names the manifold's inputs and carries how to build the set.
type ManifoldConfig struct {
	ClockName          string // a clock.Clock
	DatabaseName       string // a domain.State
	ProvisionerSetName string // a SetSource (the provisioner-set worker)
	Default            string
	Builder            SetBuilder
	// BudgetObserver records the shared rate budgets' waits, draws and tokens (optional).
	BudgetObserver environ.BudgetObserver
	Logger         *slog.Logger
	NewWorker      func(Config) (worker.Worker, error)
}

// Validate reports the first missing field.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.NotValidf("environs manifold: empty ClockName")
	case c.DatabaseName == "":
		return errors.NotValidf("environs manifold: empty DatabaseName")
	case c.ProvisionerSetName == "":
		return errors.NotValidf("environs manifold: empty ProvisionerSetName")
	case c.Builder == nil:
		return errors.NotValidf("environs manifold: nil Builder")
	case c.Logger == nil:
		return errors.NotValidf("environs manifold: nil Logger")
	case c.NewWorker == nil:
		return errors.NotValidf("environs manifold: nil NewWorker")
	}
	return nil
}

// Manifold runs the environs worker; its output is the *environ.Set.
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{config.ClockName, config.DatabaseName, config.ProvisionerSetName},
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
			var source SetSource
			if err := getter.Get(config.ProvisionerSetName, &source); err != nil {
				return nil, err
			}
			return config.NewWorker(Config{
				Source:         source,
				Default:        config.Default,
				Builder:        config.Builder,
				Slots:          state,
				Specs:          state,
				Resources:      state,
				Budgets:        state,
				BudgetObserver: config.BudgetObserver,
				Clock:          clk,
				Logger:         config.Logger,
			})
		},
		Output: output,
	}
}

// NewManifoldWorker adapts NewWorker to ManifoldConfig.NewWorker.
func NewManifoldWorker(config Config) (worker.Worker, error) {
	return NewWorker(config)
}

func output(in worker.Worker, out any) error {
	w, ok := in.(*Worker)
	if !ok {
		return fmt.Errorf("environs manifold: expected *environs.Worker, got %T", in)
	}
	setOut, ok := out.(**environ.Set)
	if !ok {
		return fmt.Errorf("environs manifold: cannot output into %T (want **environ.Set)", out)
	}
	*setOut = w.set
	return nil
}
