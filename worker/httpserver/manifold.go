package httpserver

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	"github.com/prometheus/client_golang/prometheus"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName  string // a clock.Clock
	EngineName string // the engine itself, from dependency.SelfManifold: a dependency.Reporter

	Gatherer  prometheus.Gatherer
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
		return errors.NotValidf("httpserver manifold: empty ClockName")
	case c.EngineName == "":
		return errors.NotValidf("httpserver manifold: empty EngineName")
	case c.Gatherer == nil:
		return errors.NotValidf("httpserver manifold: nil Gatherer")
	case c.Logger == nil:
		return errors.NotValidf("httpserver manifold: nil Logger")
	case c.NewWorker == nil:
		return errors.NotValidf("httpserver manifold: nil NewWorker")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("httpserver manifold: %w", err)
	}
	return nil
}

// Manifold runs the HTTP server on the agent's clock, reporting on the engine it runs in.
func Manifold(config ManifoldConfig) dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{config.ClockName, config.EngineName},
		Start: func(ctx context.Context, getter dependency.Getter) (worker.Worker, error) {
			if err := config.Validate(); err != nil {
				return nil, err
			}
			var clk clock.Clock
			if err := getter.Get(config.ClockName, &clk); err != nil {
				return nil, err
			}
			var reporter dependency.Reporter
			if err := getter.Get(config.EngineName, &reporter); err != nil {
				return nil, err
			}
			return config.NewWorker(Config{
				Reporter: reporter,
				Gatherer: config.Gatherer,
				Logger:   config.Logger,
				Clock:    clk,
				Settings: config.Settings,
			})
		},
	}
}
