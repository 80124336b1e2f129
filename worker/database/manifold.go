package database

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
)

// ManifoldConfig names the manifold's inputs and carries its settings.
type ManifoldConfig struct {
	ClockName       string
	URL             string
	Open            Opener
	Logger          *slog.Logger
	ConnectTimeout  time.Duration
	PingInterval    time.Duration
	PingTimeout     time.Duration
	MaxPingFailures int
	NewWorker       func(Config) (worker.Worker, error)
}

// Validate reports the first missing field.
func (c ManifoldConfig) Validate() error {
	switch {
	case c.ClockName == "":
		return errors.New("database manifold: ClockName is required")
	case c.URL == "":
		return errors.New("database manifold: URL is required (--database-url or BERTH_DATABASE_URL)")
	case c.Open == nil:
		return errors.New("database manifold: Open is required")
	case c.Logger == nil:
		return errors.New("database manifold: Logger is required")
	case c.NewWorker == nil:
		return errors.New("database manifold: NewWorker is required")
	}
	return nil
}

// Manifold runs the database worker; its output is the open store as a domain.State, a
// database.DB, or a database.Hold that keeps it open until released.
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
				URL:             config.URL,
				Open:            config.Open,
				Clock:           clk,
				Logger:          config.Logger,
				ConnectTimeout:  config.ConnectTimeout,
				PingInterval:    config.PingInterval,
				PingTimeout:     config.PingTimeout,
				MaxPingFailures: config.MaxPingFailures,
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
		return fmt.Errorf("database manifold: expected *database.Worker, got %T", in)
	}
	switch out := out.(type) {
	case *domain.State:
		*out = w.db
	case *DB:
		*out = w.db
	case *Hold:
		h, err := w.hold()
		if err != nil {
			return err
		}
		*out = h
	default:
		return fmt.Errorf("database manifold: cannot output into %T (want *domain.State, *database.DB or *database.Hold)", out)
	}
	return nil
}
