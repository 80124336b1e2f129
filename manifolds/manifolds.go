// Package manifolds is the one place the agent's workers are wired together: Manifolds
// returns the whole dependency graph, read top to bottom, and NewEngine (engine.go) starts
// it in a dependency engine configured by EngineConfig (restart delays and backoff; a taken
// --http-addr is fatal), with the agent's metrics. cmd/agent only parses flags, fills
// Config and stops the engine on a signal.
//
//	clock ──► provisioner-set ─┐
//	clock ──► database ────────┴─► environs ─┬─► provisioner (starts its own resources watcher)
//	                    │                    ├─► healthcheck
//	                    │                    ├─► provisioner-names ···► membership (read, not an input)
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
// the agent stops it resigns, which gives up the agent's resource leases at once. It records
// the names of the provisioner set on the agent's row, which the provisioner-names manifold
// keeps for it: membership does not take the environs as an input, since a restart with
// every reload would resign the agent.
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
	"fmt"
	"log/slog"
	"os"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	"go.opentelemetry.io/otel/trace"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/internal/setting"
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

// Config is everything the agent's workers are configured with: their dependencies, the
// inputs of this run, and each worker's own Settings.
type Config struct {
	Clock  clock.Clock
	Logger *slog.Logger
	Rand   func() float64

	// Engine is the engine the manifolds run in, for its own report, and Metrics the
	// agent's collectors; NewEngine makes both, only a caller of Manifolds sets them.
	Engine  *dependency.Engine
	Metrics *metrics.Metrics
	// TracerProvider records the reconciles' spans (SetupTracing); nil: no traces.
	TracerProvider trace.TracerProvider
	Version        string // the Berth release, as the agent registers it

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

	// The workers' settings, each the Settings of its worker's package, checked by its
	// Validate (ValidateSettings); DefaultConfig holds their defaults. A setting several
	// workers take has one owner here, and Manifolds copies it to the others (shared),
	// which the caller leaves zero:
	//   - Membership.Agent.ID, Membership.TTL and Membership.HeartbeatInterval are the
	//     agent's identity, its agent TTL and its heartbeat, for every worker acting for
	//     the agent (provisioner, healthcheck, leadership, schema-guard, the watcher);
	//   - Health.Interval is the environ checks' interval too;
	//   - Version, HTTPServer.Addr and Provisioner.LeaseTTL are registered by membership.
	// The database and provisioner-set workers run on their packages' defaults with the
	// run's inputs above, which are known only once berth run has checked its flags.
	Membership   membership.Settings
	HTTPServer   httpserver.Settings
	Provisioner  provisioner.Settings
	Watcher      watcher.ResourcesSettings
	Health       healthcheck.Settings
	EnvironCheck environcheck.Settings
	Capacity     capacity.Settings
	ChangeLog    changelog.Settings
	Leadership   leadership.Settings
	SchemaGuard  schemaguard.Settings
}

// DefaultConfig is a Config with every worker's default settings and nothing else: the
// caller adds the agent's id, its dependencies and the run's inputs.
func DefaultConfig() Config {
	return Config{
		Membership:   membership.DefaultSettings(),
		HTTPServer:   httpserver.DefaultSettings(),
		Provisioner:  provisioner.DefaultSettings(),
		Watcher:      watcher.DefaultResourcesSettings(),
		Health:       healthcheck.DefaultSettings(),
		EnvironCheck: environcheck.DefaultSettings(),
		Capacity:     capacity.DefaultSettings(),
		ChangeLog:    changelog.DefaultSettings(),
		Leadership:   leadership.DefaultSettings(),
		SchemaGuard:  schemaguard.DefaultSettings(),
	}
}

// SettingError is a setting of Config that is not valid (ValidateSettings), named by its
// path in Config, e.g. "Provisioner.Concurrency"; Says says it as the flag that sets it.
type SettingError = setting.Error

// Validate reports the first missing field or setting that is not valid as NotValid.
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
	return c.ValidateSettings()
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

// ValidateSettings reports the first setting that is not valid, as its worker's Validate
// does; a *SettingError names it by its path in Config. The settings are checked as the
// workers get them (shared), owners first, so that a shared setting's error names its
// owner. The database and provisioner-set workers check their inputs when they start.
func (c Config) ValidateSettings() error {
	c = c.shared()
	for _, s := range []struct {
		name     string
		validate func() error
	}{
		{"Membership", c.Membership.Validate},
		{"HTTPServer", c.HTTPServer.Validate},
		{"Provisioner", c.Provisioner.Validate},
		{"Watcher", c.Watcher.Validate},
		{"Health", c.Health.Validate},
		{"EnvironCheck", c.EnvironCheck.Validate},
		{"Capacity", c.Capacity.Validate},
		{"ChangeLog", c.ChangeLog.Validate},
		{"Leadership", c.Leadership.Validate},
		{"SchemaGuard", c.SchemaGuard.Validate},
	} {
		err := s.validate()
		var invalid *SettingError
		switch {
		case errors.As(err, &invalid):
			return invalid.In(s.name)
		case err != nil:
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// shared returns c with each setting several workers take copied from its owner (see
// Config) to the others.
func (c Config) shared() Config {
	agent := domain.AgentIdentity{ID: c.Membership.Agent.ID, TTL: c.Membership.TTL}
	heartbeat := c.Membership.HeartbeatInterval
	c.Membership.Agent.TTL = agent.TTL
	c.Membership.Agent.Version = c.Version
	c.Membership.Agent.HTTPAddr = c.HTTPServer.Addr
	c.Membership.Agent.LeaseTTL = c.Provisioner.LeaseTTL
	// /readyz answers 200 once the store is open, its schema known, the set built.
	c.HTTPServer.Required = []string{DatabaseName, SchemaGuardName, EnvironsName}
	c.Provisioner.Agent = agent
	c.Provisioner.ShareGrace = heartbeat
	// A retry more than the agent TTL overdue is one its agent did not come back for: then
	// any agent takes it.
	c.Watcher.OverdueAfter = agent.TTL
	// The watcher's batches and the provisioner's queue take the owners' turns alike.
	c.Watcher.OwnerPoliciesInterval = c.Provisioner.OwnerPoliciesInterval
	c.Health.Agent = agent
	c.EnvironCheck.Interval = c.Health.Interval
	c.Leadership.Agent = agent
	c.Leadership.Interval = heartbeat
	c.SchemaGuard.Interval = heartbeat
	return c
}

// Manifolds returns the agent's dependency graph.
func Manifolds(config Config) dependency.Manifolds {
	config = config.shared()
	logger := config.Logger
	// A resource is never health-checked while this agent reconciles it.
	locks := new(resourcelock.Set)
	provisioners := new(provisionerNames)
	return dependency.Manifolds{
		ClockName:  valueManifold(config.Clock),
		EngineName: dependency.SelfManifold(config.Engine),

		HTTPServerName: httpserver.Manifold(httpserver.ManifoldConfig{
			ClockName:  ClockName,
			EngineName: EngineName,
			Gatherer:   config.Metrics,
			Settings:   config.HTTPServer,
			Logger:     logger.With("worker", HTTPServerName),
			NewWorker:  httpserver.NewManifoldWorker,
		}),

		ResourceMetricsName: resourceMetricsManifold(config.Metrics),

		DatabaseName: database.Manifold(database.ManifoldConfig{
			ClockName: ClockName,
			Open:      config.OpenDatabase,
			Logger:    logger.With("worker", DatabaseName),
			Settings:  databaseSettings(config.DatabaseURL),
			NewWorker: database.NewManifoldWorker,
		}),

		ProvisionerSetName: provisionerset.Manifold(provisionerset.ManifoldConfig{
			ClockName: ClockName,
			Signals:   config.ReloadSignals,
			Builder:   config.SetBuilder,
			Settings:  provisionerSetSettings(config),
			Logger:    logger.With("worker", ProvisionerSetName),
			NewWorker: provisionerset.NewManifoldWorker,
		}),

		EnvironsName: environs.Manifold(environs.ManifoldConfig{
			ClockName:          ClockName,
			DatabaseName:       DatabaseName,
			ProvisionerSetName: ProvisionerSetName,
			Default:            config.DefaultProvisioner,
			Builder:            config.SetBuilder,
			BudgetObserver:     config.Metrics,
			Logger:             logger.With("worker", EnvironsName),
			NewWorker:          environs.NewManifoldWorker,
		}),

		SchemaGuardName: schemaguard.Manifold(schemaguard.ManifoldConfig{
			ClockName:    ClockName,
			DatabaseName: DatabaseName,
			Settings:     config.SchemaGuard,
			Logger:       logger.With("worker", SchemaGuardName),
			NewWorker:    schemaguard.NewManifoldWorker,
		}),

		ProvisionerName: schemaguard.Gate(SchemaGuardName, provisioner.Manifold(provisioner.ManifoldConfig{
			ClockName:      ClockName,
			DatabaseName:   DatabaseName,
			EnvironsName:   EnvironsName,
			Settings:       config.Provisioner,
			Logger:         logger.With("worker", ProvisionerName),
			Rand:           config.Rand,
			Metrics:        config.Metrics,
			Locks:          locks,
			TracerProvider: config.TracerProvider,
			BreakerMetrics: config.Metrics,
			NewWorker:      provisioner.NewWorker,
			NewWatcher:     newResourcesWatcher(config.Watcher),
		})),

		ChangeLogPrunerName: leadership.Gate(LeadershipName, changelog.Manifold(changelog.ManifoldConfig{
			ClockName:      ClockName,
			DatabaseName:   DatabaseName,
			LeadershipName: LeadershipName,
			Settings:       config.ChangeLog,
			Logger:         logger.With("worker", ChangeLogPrunerName),
			NewWorker:      changelog.NewWorker,
		})),

		HealthCheckName: schemaguard.Gate(SchemaGuardName, healthcheck.Manifold(healthcheck.ManifoldConfig{
			ClockName:    ClockName,
			DatabaseName: DatabaseName,
			EnvironsName: EnvironsName,
			Settings:     config.Health,
			Logger:       logger.With("worker", HealthCheckName),
			Rand:         config.Rand,
			Metrics:      config.Metrics,
			Locks:        locks,
			NewWorker:    healthcheck.NewWorker,
		})),

		EnvironCheckName: leadership.Gate(LeadershipName, environcheck.Manifold(environcheck.ManifoldConfig{
			ClockName:    ClockName,
			EnvironsName: EnvironsName,
			Settings:     config.EnvironCheck,
			Logger:       logger.With("worker", EnvironCheckName),
			Metrics:      config.Metrics,
			NewWorker:    environcheck.NewWorker,
		})),

		MembershipName: membership.Manifold(membership.ManifoldConfig{
			ClockName:    ClockName,
			DatabaseName: DatabaseName,
			Settings:     config.Membership,
			Logger:       logger.With("worker", MembershipName),
			Metrics:      config.Metrics,
			NewWorker:    membership.NewWorker,
			Provisioners: provisioners.Names,
		}),
		ProvisionerNamesName: provisioners.manifold(),

		LeadershipName: schemaguard.Gate(SchemaGuardName, leadership.Manifold(leadership.ManifoldConfig{
			ClockName:      ClockName,
			DatabaseName:   DatabaseName,
			MembershipName: MembershipName,
			Settings:       config.Leadership,
			Logger:         logger.With("worker", LeadershipName),
			Metrics:        config.Metrics,
			NewWorker:      leadership.NewWorker,
		})),

		CapacityName: leadership.Gate(LeadershipName, capacity.Manifold(capacity.ManifoldConfig{
			ClockName:      ClockName,
			DatabaseName:   DatabaseName,
			EnvironsName:   EnvironsName,
			LeadershipName: LeadershipName,
			Settings:       config.Capacity,
			Logger:         logger.With("worker", CapacityName),
			Observer:       config.Metrics,
			NewWorker:      capacity.NewWorker,
		})),
	}
}

// databaseSettings are the database worker's default settings for the store at url.
func databaseSettings(url string) database.Settings {
	s := database.DefaultSettings()
	s.URL = url
	return s
}

// provisionerSetSettings are the provisioner-set worker's default settings for the set
// the agent started with.
func provisionerSetSettings(config Config) provisionerset.Settings {
	s := provisionerset.DefaultSettings()
	s.Initial = config.ProvisionerSetJSON
	s.Origin = config.ProvisionerSetOrigin
	s.Path = config.ProvisionersFile
	s.Default = config.DefaultProvisioner
	return s
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

// newResourcesWatcher builds the provisioner's watcher.
func newResourcesWatcher(settings watcher.ResourcesSettings) func(domain.State, clock.Clock, *slog.Logger) (provisioner.Watcher, error) {
	return func(state domain.State, clk clock.Clock, logger *slog.Logger) (provisioner.Watcher, error) {
		return watcher.NewResourcesWatcher(watcher.ResourcesConfig{
			Source:            state,
			Clock:             clk,
			Logger:            logger.With("watcher", "resources"),
			ResourcesSettings: settings,
		})
	}
}
