package httpserver

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	"github.com/prometheus/client_golang/prometheus"
)

// ManifoldConfig names the manifold's inputs and carries the worker's settings.
type ManifoldConfig struct {
	ClockName  string // a clock.Clock
	EngineName string // the engine itself, from dependency.SelfManifold: a dependency.Reporter

	Addr            string
	Gatherer        prometheus.Gatherer
	Required        []string // manifolds /readyz waits for
	ShutdownTimeout time.Duration
	Timeouts        Timeouts // zero fields take their defaults
	Profiling       bool     // serve /debug/pprof/ (see Config)
	Logger          *slog.Logger
	NewWorker       func(Config) (worker.Worker, error)
}

// Validate reports the first missing field. The worker's Config checks the settings.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.New("httpserver manifold: ClockName is required")
	case c.EngineName == "":
		return errors.New("httpserver manifold: EngineName is required")
	case c.Addr == "":
		return errors.New("httpserver manifold: Addr is required: pass --http-addr HOST:PORT (e.g. 127.0.0.1:9090)")
	case c.Gatherer == nil:
		return errors.New("httpserver manifold: Gatherer is required")
	case len(c.Required) == 0:
		return errors.New("httpserver manifold: Required is empty: name the workers /readyz waits for")
	case c.ShutdownTimeout <= 0:
		return errors.New("httpserver manifold: ShutdownTimeout is required")
	case c.Logger == nil:
		return errors.New("httpserver manifold: Logger is required")
	case c.NewWorker == nil:
		return errors.New("httpserver manifold: NewWorker is required")
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
				Addr:            config.Addr,
				Reporter:        reporter,
				Gatherer:        config.Gatherer,
				Required:        config.Required,
				Logger:          config.Logger,
				Clock:           clk,
				ShutdownTimeout: config.ShutdownTimeout,
				Timeouts:        config.Timeouts,
				Profiling:       config.Profiling,
			})
		},
	}
}
