package manifolds

import (
	"context"
	"log/slog"
	"time"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4/dependency"
	"go.opentelemetry.io/otel/trace"

	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/internal/logging"
	"github.com/berth-dev/berth/internal/tracing"
	"github.com/berth-dev/berth/metrics"
	"github.com/berth-dev/berth/worker/database"
	"github.com/berth-dev/berth/worker/httpserver"
)

// NewEngine starts the agent: a dependency engine configured by EngineConfig, running
// Manifolds(config), whose loggers format their attributes only when they write a line
// (logging.Deferred). It makes config.Engine (the engine itself) and config.Metrics (which
// the engine counts worker starts into), so the caller leaves both unset. The caller owns
// the engine: it kills it and waits for it to stop.
func NewEngine(config Config) (*dependency.Engine, error) {
	switch {
	case config.Engine != nil || config.Metrics != nil:
		return nil, errors.NotValidf("manifolds: Engine or Metrics set (NewEngine makes both: leave them unset)")
	}
	if err := config.validateInputs(); err != nil {
		return nil, err // before the engine starts: nothing to stop
	}
	if err := config.ValidateSettings(); err != nil {
		return nil, err
	}
	// The workers make a logger for every attempt and check; Deferred formats their
	// attributes only when one writes a line.
	config.Logger = slog.New(logging.Deferred(config.Logger.Handler()))
	config.Metrics = metrics.New(config.ResourceTypes...)
	engine, err := dependency.NewEngine(EngineConfig(config.Clock, config.Logger, config.Metrics))
	if err != nil {
		return nil, err
	}
	config.Engine = engine
	if err := dependency.Install(engine, Manifolds(config)); err != nil {
		engine.Kill()
		_ = engine.Wait()
		return nil, err
	}
	return engine, nil
}

// EngineConfig is the dependency engine's configuration for the agent (Juju's
// DependencyEngineConfig): a worker that fails is restarted after ErrorDelay, backing off
// to MaxDelay while it keeps failing; the engine logs on logger (component engine) and
// counts each worker's starts in m.
func EngineConfig(clk clock.Clock, logger *slog.Logger, m *metrics.Metrics) dependency.EngineConfig {
	return dependency.EngineConfig{
		// A taken --http-addr stays taken: stop with its error rather than retry forever.
		IsFatal: func(err error) bool { return errors.Is(err, httpserver.ErrCannotListen) },
		// The first fatal error is the one the agent exits with.
		WorstError:       func(err0, _ error) error { return err0 },
		ErrorDelay:       3 * time.Second,
		BounceDelay:      10 * time.Millisecond,
		BackoffFactor:    2,
		BackoffResetTime: time.Minute,
		MaxDelay:         time.Minute,
		Clock:            clk,
		Metrics:          m,
		Logger:           logging.EngineLogger{Logger: logger.With("component", "engine")},
	}
}

// StoreOpener is the Config.OpenDatabase of a running agent whose agent TTL is agentTTL: it
// opens the store the URL names (domain/store), warning on logger of an SQLite file others
// can read, with PostgreSQL's sessions ending a transaction idle for IdleInTransaction.
func StoreOpener(logger *slog.Logger, agentTTL time.Duration) database.Opener {
	idle := IdleInTransaction(agentTTL)
	return func(ctx context.Context, url string) (database.DB, error) {
		return store.Open(ctx, url, store.Options{Logger: logger, Warm: true, IdleInTransactionTimeout: idle})
	}
}

// minIdleInTransaction is the least IdleInTransaction gives: an agent's transactions send
// their statements back to back, but a loaded machine may hold a goroutine back between two
// for a good part of a second, and a session ended for it fails its work.
const minIdleInTransaction = time.Second

// IdleInTransaction is how long an agent with agent TTL agentTTL lets one of its
// transactions wait for its next statement before the server ends the session: half the
// TTL, at least minIdleInTransaction. An agent stopped mid-transaction (a frozen VM,
// SIGSTOP, a partition) so holds its row locks no longer than its liveness lasts, whose
// heartbeats come at most half a TTL apart: the claims of the agents that take its
// resources over do not wait for it to come back.
func IdleInTransaction(agentTTL time.Duration) time.Duration {
	return max(agentTTL/2, minIdleInTransaction)
}

// traceFlushTimeout bounds the export of the spans still queued when the agent stops, so
// that an unreachable collector cannot hold up its exit.
const traceFlushTimeout = 5 * time.Second

// SetupTracing returns the reconciles' tracer provider (Config.TracerProvider)
// as the OTEL_* environment asks for it (internal/tracing), with the release's version,
// and flush, which the caller calls once the engine has stopped: it exports the spans
// still queued, for at most traceFlushTimeout, warning on logger of those it could not.
func SetupTracing(ctx context.Context, version string, logger *slog.Logger) (provider trace.TracerProvider, flush func(), err error) {
	tracer, err := tracing.Setup(ctx, tracing.Options{Version: version, Logger: logger.With("component", "tracing")})
	if err != nil {
		return nil, nil, err
	}
	return tracer, func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		defer cancel()
		if err := tracer.Shutdown(ctx); err != nil {
			logger.Warn("spans not exported before exit", "error", err)
		}
	}, nil
}
