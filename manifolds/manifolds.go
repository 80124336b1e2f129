// Package manifolds is the one place the agent's workers are wired together: Manifolds
// returns the whole dependency graph, read top to bottom, and NewEngine (engine.go) starts
// it in a dependency engine configured by EngineConfig (restart delays and backoff; a taken
// --http-addr is fatal), with the agent's metrics. cmd/agent only parses flags, fills
// Config and stops the engine on a signal.
//
//	clock ──► provisioner-set ─┐
//	clock ──► database ────────┴─► environs ─┬─► provisioner (starts its own resources watcher)
//	                    │                    ├─► healthcheck
//	                    │                    ├─► environ-check ◄───────┐ (gated on the flag)
//	                    │                    └─► capacity ◄─────────────┐ (gated on the flag)
//	                    ├─► changelog-pruner ◄─────────────────────────┤ (gated on the flag)
//	                    ├─► membership ──► leadership (a flag) ────────┘
//	                    ├─► schema-guard ──► provisioner, healthcheck, leadership (gated on it)
//	                    └─► resource-metrics
//	engine ──► http-server (/healthz, /readyz, /metrics, /debug/engine)
//
// The schema guard is a flag: the database's schema is one this build knows. The
// provisioner, the health checker and the leadership flag (so every leader-only worker) are
// gated on it with schemaguard.Gate. When a newer build migrates the database (a rolling
// update, a rollback) the flag turns false, the engine stops them, /readyz fails with the
// guard's reason, and the agent stays up, registered, until it is replaced.
//
// Every worker also takes the clock, which the clock manifold holds in a value worker
// (valueworker.go). When the database worker restarts (the store was unreachable), the
// engine bounces everything below it; when the environs worker restarts, only the workers
// that provision or check through the environs. The provisioner-set worker reloads the set
// on SIGHUP or when its file changes; the environs worker then restarts with the new set
// (see worker/provisionerset and worker/environs).
//
// The membership worker registers the agent in the store's agents table and heartbeats; when
// the agent stops it resigns, which gives up the agent's resource leases at once.
//
// The leadership worker is a flag: it holds this agent's claim on the store's leadership
// lease, and the workers that must run once across the agents sharing the store (environ
// checks and orphan sweeps, capacity samples and warnings, change-log and history pruning)
// are gated on it with
// leadership.Gate. When leadership moves the flag worker restarts, and the engine starts or
// stops the gated workers with it.
//
// The health checker runs on every agent; each checks the resources whose rendezvous owner
// among the live agents it is (see worker/healthcheck), so every resource is checked once
// per interval whatever the number of agents.
//
// The provisioner and the health checker share one set of resource locks
// (internal/resourcelock), made here, so that a resource is never health-checked while this
// agent reconciles it.
//
// The provisioner starts its own watcher rather than sharing one from a manifold: a
// restarted consumer must get the watcher's initial event (every resource needing attention)
// again, which a shared watcher would already have delivered to its previous consumer.
package manifolds

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	"go.opentelemetry.io/otel/trace"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/metrics"
	"github.com/berth-dev/berth/watcher"
	"github.com/berth-dev/berth/worker/capacity"
	"github.com/berth-dev/berth/worker/changelog"
	"github.com/berth-dev/berth/worker/database"
	"github.com/berth-dev/berth/worker/environcheck"
	"github.com/berth-dev/berth/worker/environs"
	"github.com/berth-dev/berth/worker/healthcheck"
	"github.com/berth-dev/berth/worker/httpserver"
	"github.com/berth-dev/berth/worker/leadership"
	"github.com/berth-dev/berth/worker/membership"
	"github.com/berth-dev/berth/worker/provisioner"
	"github.com/berth-dev/berth/worker/provisionerset"
	"github.com/berth-dev/berth/worker/schemaguard"
)

// Names of the agent's manifolds.
const (
	ClockName           = "clock"
	DatabaseName        = "database"
	EnvironsName        = "environs"
	ProvisionerSetName  = "provisioner-set"
	ProvisionerName     = "provisioner"
	ChangeLogPrunerName = "changelog-pruner"
	HealthCheckName     = "healthcheck"
	CapacityName        = "capacity"
	EngineName          = "engine"
	HTTPServerName      = "http-server"
	ResourceMetricsName = "resource-metrics"
	MembershipName      = "membership"
	LeadershipName      = "leadership"
	EnvironCheckName    = "environ-check"
	SchemaGuardName     = "schema-guard"
)

// Config is everything the agent's workers are configured with.
type Config struct {
	Clock  clock.Clock
	Logger *slog.Logger
	Rand   func() float64

	// Engine is the engine the manifolds run in, for its own report, and Metrics the
	// agent's collectors; NewEngine makes both, only a caller of Manifolds sets them.
	Engine   *dependency.Engine
	Metrics  *metrics.Metrics
	HTTPAddr string
	// Profiling serves Go's profiles under /debug/pprof/ on HTTPAddr.
	Profiling bool
	Version   string // the Berth release, as the agent registers it

	DatabaseURL  string
	OpenDatabase database.Opener

	ProvisionerSetJSON []byte
	// ProvisionerSetOrigin says where the set came from ("file PATH" or the environment
	// variable); ProvisionersFile is the file to reload it from, empty for the environment.
	ProvisionerSetOrigin string
	ProvisionersFile     string
	// ReloadSignals asks for the provisioner set to be reloaded (SIGHUP); nil for none.
	ReloadSignals      <-chan os.Signal
	DefaultProvisioner string
	SetBuilder         environs.SetBuilder
	// ResourceTypes are the resource types the agent serves (the SetBuilder's catalog), which
	// metrics label by name; any other type a row names is labelled unknown.
	ResourceTypes []domain.ResourceType

	Provisioner ProvisionerSettings
	Watcher     WatcherSettings

	Health     HealthSettings
	Capacity   CapacitySettings
	Membership MembershipSettings

	ChangeLogRetain time.Duration
	// HistoryRetain is how long resource events and capacity samples are kept.
	HistoryRetain time.Duration
}

// HealthSettings tune the health-check worker.
type HealthSettings struct {
	Interval    time.Duration // every ready resource is checked once per interval
	Concurrency int
}

// MembershipSettings tune the membership worker; the agent registers under
// Provisioner.Holder, its lease identity.
type MembershipSettings struct {
	HeartbeatInterval time.Duration
	AgentTTL          time.Duration // an agent is live while its last heartbeat is younger
	PruneAfter        time.Duration // agents silent this long are removed
}

// CapacitySettings tune the capacity worker.
type CapacitySettings struct {
	Interval time.Duration
	// WarnTotal warns when this fraction of a provisioner's usable capacity is used,
	// WarnHost when every usable host is at least this fraction full.
	WarnTotal, WarnHost float64
}

// ProvisionerSettings tune the provisioner worker.
type ProvisionerSettings struct {
	Holder           string // this agent's lease identity
	Concurrency      int
	AwaitConcurrency int
	LeaseTTL         time.Duration
	ReconcileTimeout time.Duration
	BackoffBase      time.Duration
	BackoffMax       time.Duration
	CapacityRetry    time.Duration
	TracerProvider   trace.TracerProvider // the reconciles' spans; nil: no traces
}

// WatcherSettings tune the resources watcher.
type WatcherSettings struct {
	PollInterval time.Duration
	GapTimeout   time.Duration
	BatchSize    int
}

// Validate reports the first missing field as NotValid. The workers' Settings are checked by
// their manifolds, each once.
func (c Config) Validate() error {
	if err := c.validateInputs(); err != nil {
		return err
	}
	switch {
	case c.Engine == nil:
		return errors.NotValidf("manifolds: nil Engine")
	case c.Metrics == nil:
		return errors.NotValidf("manifolds: nil Metrics")
	}
	return nil
}

// validateInputs checks the fields the caller fills whether or not NewEngine makes the
// engine and metrics.
func (c Config) validateInputs() error {
	switch {
	case c.Clock == nil:
		return errors.NotValidf("manifolds: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("manifolds: nil Logger")
	case c.Rand == nil:
		return errors.NotValidf("manifolds: nil Rand")
	case c.OpenDatabase == nil:
		return errors.NotValidf("manifolds: nil OpenDatabase")
	case c.SetBuilder == nil:
		return errors.NotValidf("manifolds: nil SetBuilder")
	}
	return nil
}

// Manifolds returns the agent's dependency graph.
func Manifolds(config Config) dependency.Manifolds {
	logger := config.Logger
	// A resource is never health-checked while this agent reconciles it.
	locks := new(resourcelock.Set)
	// The agent as the workers that act for it know it: its lease holder is its id.
	agent := domain.AgentIdentity{ID: config.Provisioner.Holder, TTL: config.Membership.AgentTTL}
	return dependency.Manifolds{
		ClockName:  valueManifold(config.Clock),
		EngineName: dependency.SelfManifold(config.Engine),

		HTTPServerName: httpserver.Manifold(httpserver.ManifoldConfig{
			ClockName:  ClockName,
			EngineName: EngineName,
			Gatherer:   config.Metrics,
			Settings: httpserver.Settings{
				Addr:            config.HTTPAddr,
				Required:        []string{DatabaseName, SchemaGuardName, EnvironsName},
				ShutdownTimeout: 5 * time.Second,
				Profiling:       config.Profiling,
			},
			Logger:    logger.With("worker", HTTPServerName),
			NewWorker: httpserver.NewManifoldWorker,
		}),

		ResourceMetricsName: resourceMetricsManifold(config.Metrics),

		DatabaseName: database.Manifold(database.ManifoldConfig{
			ClockName: ClockName,
			Open:      config.OpenDatabase,
			Logger:    logger.With("worker", DatabaseName),
			Settings: database.Settings{
				URL:             config.DatabaseURL,
				ConnectTimeout:  30 * time.Second,
				PingInterval:    5 * time.Second,
				PingTimeout:     5 * time.Second,
				MaxPingFailures: 3,
			},
			NewWorker: database.NewManifoldWorker,
		}),

		ProvisionerSetName: provisionerset.Manifold(provisionerset.ManifoldConfig{
			ClockName: ClockName,
			Signals:   config.ReloadSignals,
			Builder:   config.SetBuilder,
			Settings: provisionerset.Settings{
				Initial: config.ProvisionerSetJSON,
				Origin:  config.ProvisionerSetOrigin,
				Path:    config.ProvisionersFile,
				Default: config.DefaultProvisioner,
				// Long enough for a save's burst of events, short enough to feel immediate.
				Debounce: 500 * time.Millisecond,
			},
			Logger:    logger.With("worker", ProvisionerSetName),
			NewWorker: provisionerset.NewManifoldWorker,
		}),

		EnvironsName: environs.Manifold(environs.ManifoldConfig{
			ClockName:          ClockName,
			DatabaseName:       DatabaseName,
			ProvisionerSetName: ProvisionerSetName,
			Default:            config.DefaultProvisioner,
			Builder:            config.SetBuilder,
			Logger:             logger.With("worker", EnvironsName),
			NewWorker:          environs.NewManifoldWorker,
		}),

		SchemaGuardName: schemaguard.Manifold(schemaguard.ManifoldConfig{
			ClockName:    ClockName,
			DatabaseName: DatabaseName,
			Settings: schemaguard.Settings{
				Interval: config.Membership.HeartbeatInterval,
				Timeout:  5 * time.Second,
			},
			Logger:    logger.With("worker", SchemaGuardName),
			NewWorker: schemaguard.NewManifoldWorker,
		}),

		ProvisionerName: schemaguard.Gate(SchemaGuardName, provisioner.Manifold(provisioner.ManifoldConfig{
			ClockName:    ClockName,
			DatabaseName: DatabaseName,
			EnvironsName: EnvironsName,
			Settings: provisioner.Settings{
				Agent:            agent,
				Concurrency:      config.Provisioner.Concurrency,
				AwaitConcurrency: config.Provisioner.AwaitConcurrency,
				LeaseTTL:         config.Provisioner.LeaseTTL,
				ReconcileTimeout: config.Provisioner.ReconcileTimeout,
				BackoffBase:      config.Provisioner.BackoffBase,
				BackoffMax:       config.Provisioner.BackoffMax,
				CapacityRetry:    config.Provisioner.CapacityRetry,
				ShareGrace:       config.Membership.HeartbeatInterval,
			},
			Logger:         logger.With("worker", ProvisionerName),
			Rand:           config.Rand,
			Metrics:        config.Metrics,
			Locks:          locks,
			TracerProvider: config.Provisioner.TracerProvider,
			NewWorker:      provisioner.NewWorker,
			NewWatcher:     newResourcesWatcher(config.Watcher, config.Membership.AgentTTL),
		})),

		ChangeLogPrunerName: leadership.Gate(LeadershipName, changelog.Manifold(changelog.ManifoldConfig{
			ClockName:      ClockName,
			DatabaseName:   DatabaseName,
			LeadershipName: LeadershipName,
			Settings: changelog.Settings{
				Interval:      10 * time.Minute,
				Retain:        config.ChangeLogRetain,
				HistoryRetain: config.HistoryRetain,
			},
			Logger:    logger.With("worker", ChangeLogPrunerName),
			NewWorker: changelog.NewWorker,
		})),

		HealthCheckName: schemaguard.Gate(SchemaGuardName, healthcheck.Manifold(healthcheck.ManifoldConfig{
			ClockName:    ClockName,
			DatabaseName: DatabaseName,
			EnvironsName: EnvironsName,
			Settings: healthcheck.Settings{
				Agent:        agent,
				Interval:     config.Health.Interval,
				Concurrency:  config.Health.Concurrency,
				PageSize:     500,
				CheckTimeout: 30 * time.Second,
			},
			Logger:    logger.With("worker", HealthCheckName),
			Rand:      config.Rand,
			Metrics:   config.Metrics,
			Locks:     locks,
			NewWorker: healthcheck.NewWorker,
		})),

		EnvironCheckName: leadership.Gate(LeadershipName, environcheck.Manifold(environcheck.ManifoldConfig{
			ClockName:    ClockName,
			EnvironsName: EnvironsName,
			Settings: environcheck.Settings{
				Interval:     config.Health.Interval,
				CheckTimeout: time.Minute,
			},
			Logger:    logger.With("worker", EnvironCheckName),
			Metrics:   config.Metrics,
			NewWorker: environcheck.NewWorker,
		})),

		MembershipName: membership.Manifold(membership.ManifoldConfig{
			ClockName:    ClockName,
			DatabaseName: DatabaseName,
			Settings: membership.Settings{
				Agent: domain.AgentInfo{
					ID: agent.ID, Version: config.Version, HTTPAddr: config.HTTPAddr,
					TTL: agent.TTL, LeaseTTL: config.Provisioner.LeaseTTL,
				},
				HeartbeatInterval: config.Membership.HeartbeatInterval,
				TTL:               agent.TTL,
				Timeout:           10 * time.Second,
				ResignTimeout:     5 * time.Second,
				PruneInterval:     time.Hour,
				PruneAfter:        config.Membership.PruneAfter,
			},
			Logger:    logger.With("worker", MembershipName),
			Metrics:   config.Metrics,
			NewWorker: membership.NewWorker,
		}),

		LeadershipName: schemaguard.Gate(SchemaGuardName, leadership.Manifold(leadership.ManifoldConfig{
			ClockName:      ClockName,
			DatabaseName:   DatabaseName,
			MembershipName: MembershipName,
			Settings: leadership.Settings{
				Agent:    agent,
				Interval: config.Membership.HeartbeatInterval,
				Timeout:  5 * time.Second,
			},
			Logger:    logger.With("worker", LeadershipName),
			Metrics:   config.Metrics,
			NewWorker: leadership.NewWorker,
		})),

		CapacityName: leadership.Gate(LeadershipName, capacity.Manifold(capacity.ManifoldConfig{
			ClockName:      ClockName,
			DatabaseName:   DatabaseName,
			EnvironsName:   EnvironsName,
			LeadershipName: LeadershipName,
			Settings: capacity.Settings{
				Interval:   config.Capacity.Interval,
				Timeout:    30 * time.Second,
				Thresholds: capacity.Thresholds{Total: config.Capacity.WarnTotal, Host: config.Capacity.WarnHost},
			},
			Logger:    logger.With("worker", CapacityName),
			Observer:  config.Metrics,
			NewWorker: capacity.NewWorker,
		})),
	}
}

// resourceMetricsManifold makes berth_resources count the database's resources while it is
// up.
func resourceMetricsManifold(m *metrics.Metrics) dependency.Manifold {
	return dependency.Manifold{
		Inputs: []string{DatabaseName},
		Start: func(_ context.Context, getter dependency.Getter) (worker.Worker, error) {
			var state domain.State
			if err := getter.Get(DatabaseName, &state); err != nil {
				return nil, err
			}
			return newValueWorker(nil, m.TrackResources(state))
		},
	}
}

// newResourcesWatcher builds the provisioner's watcher. A retry more than agentTTL overdue
// is one its agent did not come back for: then any agent takes it.
func newResourcesWatcher(settings WatcherSettings, agentTTL time.Duration) func(domain.State, clock.Clock, *slog.Logger) (provisioner.Watcher, error) {
	return func(state domain.State, clk clock.Clock, logger *slog.Logger) (provisioner.Watcher, error) {
		return watcher.NewResourcesWatcher(watcher.ResourcesConfig{
			Source:       state,
			Clock:        clk,
			Logger:       logger.With("watcher", "resources"),
			PollInterval: settings.PollInterval,
			OverdueAfter: agentTTL,
			GapTimeout:   settings.GapTimeout,
			BatchSize:    settings.BatchSize,
		})
	}
}
