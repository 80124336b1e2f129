package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4/dependency"
	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/manifolds"
)

// runOptions are berth run's flags: the workers' settings, which they are bound to in
// config, and the agent's own.
type runOptions struct {
	config          manifolds.Config
	shutdownTimeout time.Duration
	flags           settingFlags
}

func newRunCommand(opts *globalOptions) *cobra.Command {
	run := runOptions{config: manifolds.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the agent: watch the resources table and provision every change",
		Long: `Run the Berth agent in the foreground.

The agent brings the database schema up to date, builds the provisioner set, and then
reconciles every resource row through its provisioner until it receives SIGTERM or SIGINT,
when it stops its workers and exits within --shutdown-timeout.

Without --database-url the agent keeps its resources in an SQLite file (its first log line
says which). An SQLite file serves one agent: a second one on the same file refuses to start.

Several agents may share one PostgreSQL database: each needs its own --agent-id (default: the
host name), which names the leases it takes on resources it is reconciling. An agent restarted
under the same id resumes its own leases at once.

Each agent registers in the agents table (berth agents lists them) and heartbeats every
--heartbeat-interval; it counts as live while its last heartbeat is younger than --agent-ttl.
Each heartbeat renews the agent's leases for --lease-ttl, and a lease is void as soon as its
agent is not live: another agent takes a dead agent's resources over within --agent-ttl and
a poll (--poll-interval), changed or not. A graceful stop removes the agent and gives up its
leases in one transaction that logs them as changes, so the other agents take them at once;
an agent that dies stays listed, not live, until it is removed after a day of silence.

The provisioner set is reloaded without a restart on SIGHUP and, with --provisioners FILE,
whenever the file changes (an in-place write or a rename over it). The new set is checked as
berth check-config does; an invalid one is logged with the provisioner and field at fault
and the agent keeps running the set it has. A valid one restarts the provisioners and the
workers that use them (not the database connection or the HTTP server), and the resources of
every provisioner whose spec changed are reconciled onto the new spec (a static runtime whose
host was removed moves to a configured host; a new image is rolled out). The same happens at
startup for a spec changed while the agent was down. With BERTH_PROVISIONER_SET_JSON there is
nothing to reload: the environment cannot change.`,
		Example: `  # Run against a database with a provisioner set from a file
  berth run --database-url postgres://berth@db/berth --provisioners provisioners.json

  # The same with environment variables
  export BERTH_DATABASE_URL=postgres://berth@db/berth
  export BERTH_PROVISIONER_SET_JSON="$(cat provisioners.json)"
  export BERTH_DEFAULT_PROVISIONER=static-example
  berth run

  # Reload the provisioner set after editing provisioners.json (it is also reloaded on its own)
  kill -HUP "$(pidof berth)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgent(cmd.Context(), opts, run)
		},
	}
	hostname, _ := os.Hostname()
	cfg := &run.config
	f := settingFlags{cmd: cmd, names: map[string]string{}, envs: map[string]string{}}
	f.string(&cfg.Membership.Agent.ID, "Membership.Agent.ID", "agent-id", "BERTH_AGENT_ID", hostname, "this agent's identity for resource leases (env BERTH_AGENT_ID); unique per agent")
	f.int(&cfg.Provisioner.Concurrency, "Provisioner.Concurrency", "concurrency", "the most resources reconciled at once, those waiting for a rollout aside: the agent starts at --min-concurrency and grows fourfold while that raises throughput, up to this (at or below --min-concurrency: fixed)")
	f.int(&cfg.Provisioner.MinConcurrency, "Provisioner.MinConcurrency", "min-concurrency", "where the limit on resources reconciled at once starts and the lowest it goes back to; set it to --concurrency for a fixed limit")
	f.int(&cfg.Provisioner.AwaitConcurrency, "Provisioner.AwaitConcurrency", "await-concurrency", "how many reconciles may wait for their resource to serve (a Kubernetes rollout) beside --concurrency; a waiting one gives its place back")
	f.duration(&cfg.Provisioner.LeaseTTL, "Provisioner.LeaseTTL", "lease-ttl", "how long a resource's reconcile lease lasts without a heartbeat of its agent (each heartbeat renews it); must exceed --reconcile-timeout")
	f.duration(&cfg.Provisioner.ReconcileTimeout, "Provisioner.ReconcileTimeout", "reconcile-timeout", "time limit of one reconcile attempt (provision and wait for ready, or deprovision)")
	f.duration(&cfg.Provisioner.BackoffBase, "Provisioner.BackoffBase", "backoff-base", "first retry delay after a failed attempt; it doubles per attempt, with jitter")
	f.duration(&cfg.Provisioner.BackoffMax, "Provisioner.BackoffMax", "backoff-max", "longest retry delay")
	f.duration(&cfg.Provisioner.CapacityRetry, "Provisioner.CapacityRetry", "capacity-retry", "longest wait between retries of a resource waiting for capacity")
	f.duration(&cfg.Provisioner.OwnerPoliciesInterval, "Provisioner.OwnerPoliciesInterval", "owner-policies-interval", "how often the owners' weights and metrics classes (berth owners set) are read again")
	f.int(&cfg.Watcher.ReadAhead, "Watcher.ReadAhead", "read-ahead", "how many resource ids the agent reads ahead of its queue so that owners take turns; beyond it, work is taken in change order")
	cmd.Flags().BoolVar(&cfg.Provisioner.MetricsOwnerLabels, "metrics-owner-labels", false, "label the provisioner's queue depth by owner instead of owner class: every owner becomes a time series, so only for few owners")
	f.duration(&cfg.Watcher.PollInterval, "Watcher.PollInterval", "poll-interval", "how often the change log is read when no notification arrives, and the resources of agents that are not live looked up")
	f.duration(&cfg.ChangeLog.Retain, "ChangeLog.Retain", "change-log-retention", "how long change-log entries are kept")
	f.duration(&cfg.ChangeLog.HistoryRetain, "ChangeLog.HistoryRetain", "event-retention", "how long resource events and capacity samples are kept")
	f.duration(&cfg.Health.Interval, "Health.Interval", "health-interval", "every ready resource is health-checked once per interval, spread evenly over it; environs are checked once per interval")
	f.int(&cfg.Health.Concurrency, "Health.Concurrency", "health-concurrency", "how many resource health checks run at once")
	f.duration(&cfg.Capacity.Interval, "Capacity.Interval", "capacity-interval", "how often each environ's capacity is sampled")
	f.float(&cfg.Capacity.Thresholds.Total, "Capacity.Thresholds.Total", "capacity-warn-total", "warn when this fraction of an environ's usable capacity is used")
	f.float(&cfg.Capacity.Thresholds.Host, "Capacity.Thresholds.Host", "capacity-warn-host", "warn when every usable host of an environ is at least this fraction full")
	cmd.Flags().DurationVar(&run.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "how long a graceful stop may take before the agent exits anyway")
	f.duration(&cfg.Membership.HeartbeatInterval, "Membership.HeartbeatInterval", "heartbeat-interval", "how often the agent records in the database that it is alive")
	f.duration(&cfg.Membership.TTL, "Membership.TTL", "agent-ttl", "an agent is live while its last heartbeat is younger than this; at least twice --heartbeat-interval")
	f.string(&cfg.HTTPServer.Addr, "HTTPServer.Addr", "http-addr", "", cfg.HTTPServer.Addr, "where to serve /healthz, /readyz, /metrics and /debug/engine (read by berth status --agent-addr)")
	cmd.Flags().BoolVar(&cfg.HTTPServer.Profiling, "debug-pprof", false, "also serve Go's profiles under /debug/pprof/ on --http-addr (e.g. go tool pprof http://127.0.0.1:9090/debug/pprof/heap); they show the agent's internals to whoever reaches the port")
	run.flags = f
	return cmd
}

// defaultShutdownTimeout leaves the workers time to finish an attempt's write and to resign
// the agent's leases.
const defaultShutdownTimeout = 30 * time.Second

// validate checks the flags: the workers' settings as their packages check them (once, in
// manifolds.Config.ValidateSettings), each named as the flag that sets it.
func (r *runOptions) validate() error {
	err := r.config.ValidateSettings()
	var invalid *manifolds.SettingError
	switch {
	case errors.As(err, &invalid):
		return r.flags.say(invalid)
	case err != nil:
		return err
	case r.shutdownTimeout <= 0:
		return errors.New("--shutdown-timeout must be positive")
	}
	return nil
}

// settingFlags binds flags to the workers' settings, each flag's default the setting's
// own, and knows which flag sets which setting (by its path in manifolds.Config), so that
// a setting that is not valid is reported as the flag the user passed.
type settingFlags struct {
	cmd   *cobra.Command
	names map[string]string // setting -> flag
	envs  map[string]string // setting -> the environment variable that also sets it
}

func (f settingFlags) duration(p *time.Duration, setting, name, usage string) {
	f.cmd.Flags().DurationVar(p, name, *p, usage)
	f.names[setting] = "--" + name
}

func (f settingFlags) int(p *int, setting, name, usage string) {
	f.cmd.Flags().IntVar(p, name, *p, usage)
	f.names[setting] = "--" + name
}

func (f settingFlags) float(p *float64, setting, name, usage string) {
	f.cmd.Flags().Float64Var(p, name, *p, usage)
	f.names[setting] = "--" + name
}

// string binds a flag whose default is fallback, or env's value when env is set.
func (f settingFlags) string(p *string, setting, name, env, fallback, usage string) {
	if env != "" {
		fallback = envOr(env, fallback)
		f.envs[setting] = env
	}
	f.cmd.Flags().StringVar(p, name, fallback, usage)
	f.names[setting] = "--" + name
}

// say is invalid as the command line says it.
func (f settingFlags) say(invalid *manifolds.SettingError) error {
	msg := invalid.Says(func(setting string) (string, bool) {
		name, ok := f.names[setting]
		return name, ok
	})
	if env, ok := f.envs[invalid.Name]; ok {
		msg += " (or set " + env + ")"
	}
	return errors.New(msg)
}

// agentGCPercent is the agent's garbage-collection target when GOGC is not set: the collector
// runs once the heap has grown by twice what was live after the last collection, not by as
// much (Go's default, 100). At 100 a quarter of the agent's CPU under a burst went to the
// collector; at 200 a runtime costs the agent about a tenth less CPU (97 against 87 us on
// the static pool, +8% throughput in three pairs) and a burst of 100,000 runtimes peaks at
// 121 against 93 MiB.
const agentGCPercent = 200

// setGCPercent sets the collector's target to agentGCPercent unless the operator set GOGC,
// which wins (as does GOMEMLIMIT, which Go applies whatever the target), and returns the
// target in force.
func setGCPercent() int {
	if _, set := os.LookupEnv("GOGC"); set {
		sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(sample)
		return int(sample[0].Value.Uint64())
	}
	debug.SetGCPercent(agentGCPercent)
	return agentGCPercent
}

func runAgent(parent context.Context, opts *globalOptions, run runOptions) error {
	if err := run.validate(); err != nil {
		return err
	}
	logger, err := opts.newLogger(os.Stderr)
	if err != nil {
		return err
	}
	dbURL, err := opts.resolvedDatabaseURL()
	if err != nil {
		return err
	}
	location, err := store.Parse(dbURL)
	if err != nil {
		return err
	}
	release, err := store.LockAgent(dbURL)
	if err != nil {
		return err
	}
	defer func() { _ = release() }()
	logger.Info("starting berth agent", "agent-id", run.config.Membership.Agent.ID, "database", location.String(), "gc-percent", setGCPercent())
	set, setJSON, source, err := loadProvisionerSet(opts, logger)
	if err != nil {
		return err
	}
	if err := set.Close(); err != nil {
		return err
	}
	registry := newRegistryFor(setJSON)
	// Asked for before anything starts, so a SIGHUP never ends the agent (its default action).
	reload := make(chan os.Signal, 1)
	signal.Notify(reload, syscall.SIGHUP)
	defer signal.Stop(reload)
	logger.Info("provisioner set loaded", "provisioners", source)

	tracer, flushTraces, err := manifolds.SetupTracing(parent, version, logger)
	if err != nil {
		return err
	}
	defer flushTraces()

	config := run.config
	config.Clock = clock.WallClock
	config.Logger = logger
	config.Rand = rand.Float64 // goroutine-safe
	config.TracerProvider = tracer
	config.Version = version
	config.DatabaseURL = dbURL
	config.OpenDatabase = manifolds.StoreOpener(logger, config.Membership.TTL)
	config.ProvisionerSetJSON = setJSON
	config.ProvisionerSetOrigin = source
	config.ProvisionersFile = opts.provisionersFile
	config.ReloadSignals = reload
	config.DefaultProvisioner = opts.defaultProvisioner
	config.SetBuilder = registry
	// The types the set's specs define are labelled by name too; one a reload adds is Unknown.
	config.ResourceTypes = set.Catalog.TypeNames()
	engine, err := manifolds.NewEngine(config)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopped := make(chan error, 1)
	go func() { stopped <- engine.Wait() }()
	select {
	case err := <-stopped:
		return err
	case <-ctx.Done():
	}
	logger.Info("stopping berth agent", "timeout", run.shutdownTimeout)
	engine.Kill()
	select {
	case err := <-stopped:
		if err != nil && !errors.Is(err, dependency.ErrUninstall) {
			logger.Warn("workers stopped with an error", "err", err)
		}
		logger.Info("berth agent stopped")
		return nil
	case <-config.Clock.After(run.shutdownTimeout):
		return fmt.Errorf("workers did not stop within --shutdown-timeout %s; exiting anyway (leases expire after --lease-ttl)", run.shutdownTimeout)
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
