package provisionerset

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
)

// ManifoldConfig names the manifold's input and carries the worker's settings.
type ManifoldConfig struct {
	ClockName string

	Signals <-chan os.Signal
	Builder SetBuilder

	Logger    *slog.Logger
	NewWorker func(Config) (worker.Worker, error)

	// Settings are handed to the worker's Config whole.
	Settings
}

// Validate reports the first missing name or function, or setting that is not valid
// (NotValid).
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.NotValidf("provisioner-set manifold: empty ClockName")
	case c.Logger == nil:
		return errors.NotValidf("provisioner-set manifold: nil Logger")
	case c.NewWorker == nil:
		return errors.NotValidf("provisioner-set manifold: nil NewWorker")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("provisioner-set manifold: %w", err)
	}
	return nil
}

// Manifold runs the provisioner-set worker; its output is the worker, as the consumer's
// interface with its Current method (see output).
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{config.ClockName},
		Start: func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
			if err := config.Validate(); err != nil {
				return nil, err
			}
			var clk clock.Clock
			if err := getter.Get(config.ClockName, &clk); err != nil {
				return nil, err
			}
			return config.NewWorker(Config{
				Signals:  config.Signals,
				Builder:  config.Builder,
				Clock:    clk,
				Logger:   config.Logger,
				Settings: config.Settings,
			})
		},
		Output: output,
	}
}

// NewManifoldWorker adapts NewWorker to ManifoldConfig.NewWorker.
func NewManifoldWorker(config Config) (worker.Worker, error) {
	return NewWorker(config)
}

// output hands the worker out as the interface its consumer declares for it (the environs
// worker's SetSource): out must point to an interface *Worker implements. So the consumer
// names what it uses and neither worker imports the other.
func output(in worker.Worker, out any) error {
	w, ok := in.(*Worker)
	if !ok {
		return fmt.Errorf("provisioner-set manifold: expected *provisionerset.Worker, got %T", in)
	}
	target := reflect.ValueOf(out)
	if target.Kind() != reflect.Pointer || target.IsNil() || target.Elem().Kind() != reflect.Interface || !reflect.TypeOf(w).Implements(target.Elem().Type()) {
		return fmt.Errorf("provisioner-set manifold: cannot output into %T (want a pointer to an interface with Current() ([]byte, <-chan struct{}))", out)
	}
	target.Elem().Set(reflect.ValueOf(w))
	return nil
}
