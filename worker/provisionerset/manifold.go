package provisionerset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
)

// ManifoldConfig names the manifold's input and carries the set's origin.
type ManifoldConfig struct {
	ClockName string

	Initial  []byte
	Origin   string
	Path     string
	Signals  <-chan os.Signal
	Default  string
	Builder  SetBuilder
	Debounce time.Duration

	Logger    *slog.Logger
	NewWorker func(Config) (worker.Worker, error)
}

// Validate reports the first missing field; the worker's Config checks the rest.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.New("provisioner-set manifold: ClockName is required")
	case c.Logger == nil:
		return errors.New("provisioner-set manifold: Logger is required")
	case c.NewWorker == nil:
		return errors.New("provisioner-set manifold: NewWorker is required")
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
				Initial:  config.Initial,
				Origin:   config.Origin,
				Path:     config.Path,
				Signals:  config.Signals,
				Default:  config.Default,
				Builder:  config.Builder,
				Debounce: config.Debounce,
				Clock:    clk,
				Logger:   config.Logger,
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
