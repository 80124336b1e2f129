package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4/dependency"
	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/manifolds"
)

// runOptions are the agent's tuning flags; the defaults suit a production agent.
type runOptions struct {
	agentID          string
	concurrency      int
	awaitConcurrency int
	leaseTTL         time.Duration
	reconcileTimeout time.Duration
	backoffBase      time.Duration
	backoffMax       time.Duration
	capacityRetry    time.Duration
	pollInterval     time.Duration
	changeLogRetain  time.Duration
	eventRetain      time.Duration
	healthInterval   time.Duration
	healthParallel   int
	capacityInterval time.Duration
	capacityWarnAll  float64
	capacityWarnHost float64
	shutdownTimeout  time.Duration
	httpAddr         string
	pprof            bool
	heartbeatEvery   time.Duration
	agentTTL         time.Duration
}

// agentPruneAfter is how long an agent must have been silent for the membership worker to
// remove it from the agents table; --agent-ttl must stay below it.
const agentPruneAfter = 24 * time.Hour

func newRunCommand(opts *globalOptions) *cobra.Command {
	run := runOptions{}
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
	f := cmd.Flags()
	f.StringVar(&run.agentID, "agent-id", envOr("BERTH_AGENT_ID", hostname), "this agent's identity for resource leases (env BERTH_AGENT_ID); unique per agent")
	f.IntVar(&run.concurrency, "concurrency", 16, "how many resources are reconciled at once, those waiting for a rollout aside")
	f.IntVar(&run.awaitConcurrency, "await-concurrency", 256, "how many reconciles may wait for their resource to serve (a Kubernetes rollout) beside --concurrency; a waiting one gives its place back")
	f.DurationVar(&run.leaseTTL, "lease-ttl", 10*time.Minute, "how long a resource's reconcile lease lasts without a heartbeat of its agent (each heartbeat renews it); must exceed --reconcile-timeout")
	f.DurationVar(&run.reconcileTimeout, "reconcile-timeout", 5*time.Minute, "time limit of one reconcile attempt (provision and wait for ready, or deprovision)")
	f.DurationVar(&run.backoffBase, "backoff-base", time.Second, "first retry delay after a failed attempt; it doubles per attempt, with jitter")
	f.DurationVar(&run.backoffMax, "backoff-max", 5*time.Minute, "longest retry delay")
	f.DurationVar(&run.capacityRetry, "capacity-retry", 30*time.Second, "longest wait between retries of a resource waiting for capacity")
	f.DurationVar(&run.pollInterval, "poll-interval", 2*time.Second, "how often the change log is read when no notification arrives, and the resources of agents that are not live looked up")
	f.DurationVar(&run.changeLogRetain, "change-log-retention", 24*time.Hour, "how long change-log entries are kept")
	f.DurationVar(&run.eventRetain, "event-retention", 7*24*time.Hour, "how long resource events and capacity samples are kept")
	f.DurationVar(&run.healthInterval, "health-interval", time.Minute, "every ready resource is health-checked once per interval, spread evenly over it; environs are checked once per interval")
	f.IntVar(&run.healthParallel, "health-concurrency", 8, "how many resource health checks run at once")
	f.DurationVar(&run.capacityInterval, "capacity-interval", time.Minute, "how often each environ's capacity is sampled")
	f.Float64Var(&run.capacityWarnAll, "capacity-warn-total", 0.8, "warn when this fraction of an environ's usable capacity is used")
	f.Float64Var(&run.capacityWarnHost, "capacity-warn-host", 0.7, "warn when every usable host of an environ is at least this fraction full")
	f.DurationVar(&run.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful stop may take before the agent exits anyway")
	f.DurationVar(&run.heartbeatEvery, "heartbeat-interval", 2*time.Second, "how often the agent records in the database that it is alive")
	f.DurationVar(&run.agentTTL, "agent-ttl", defaultAgentTTL, "an agent is live while its last heartbeat is younger than this; at least twice --heartbeat-interval")
	f.StringVar(&run.httpAddr, "http-addr", defaultAgentAddr, "where to serve /healthz, /readyz, /metrics and /debug/engine (read by berth status --agent-addr)")
	f.BoolVar(&run.pprof, "debug-pprof", false, "also serve Go's profiles under /debug/pprof/ on --http-addr (e.g. go tool pprof http://127.0.0.1:9090/debug/pprof/heap); they show the agent's internals to whoever reaches the port")
	return cmd
}

func (r runOptions) validate() error {
	switch {
	case r.agentID == "":
		return errors.New("--agent-id is empty: pass a name unique to this agent (or set BERTH_AGENT_ID)")
	case r.concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, got %d", r.concurrency)
	case r.awaitConcurrency < 1:
		return fmt.Errorf("--await-concurrency must be at least 1, got %d", r.awaitConcurrency)
	case r.reconcileTimeout <= 0:
		return errors.New("--reconcile-timeout must be positive")
	case r.leaseTTL <= r.reconcileTimeout:
		return fmt.Errorf("--lease-ttl (%s) must exceed --reconcile-timeout (%s), or another agent could take over a resource mid-reconcile", r.leaseTTL, r.reconcileTimeout)
	case r.backoffBase <= 0 || r.backoffMax < r.backoffBase:
		return fmt.Errorf("--backoff-base must be positive and at most --backoff-max (got %s and %s)", r.backoffBase, r.backoffMax)
	case r.capacityRetry <= 0:
		return errors.New("--capacity-retry must be positive")
	case r.pollInterval <= 0:
		return errors.New("--poll-interval must be positive")
	case r.changeLogRetain <= 0:
		return errors.New("--change-log-retention must be positive")
	case r.eventRetain <= 0:
		return errors.New("--event-retention must be positive")
	case r.healthInterval <= 0:
		return errors.New("--health-interval must be positive")
	case r.healthParallel < 1:
		return fmt.Errorf("--health-concurrency must be at least 1, got %d", r.healthParallel)
	case r.capacityInterval <= 0:
		return errors.New("--capacity-interval must be positive")
	case r.capacityWarnAll <= 0 || r.capacityWarnAll > 1:
		return fmt.Errorf("--capacity-warn-total must be a fraction in (0, 1], got %v", r.capacityWarnAll)
	case r.capacityWarnHost <= 0 || r.capacityWarnHost > 1:
		return fmt.Errorf("--capacity-warn-host must be a fraction in (0, 1], got %v", r.capacityWarnHost)
	case r.shutdownTimeout <= 0:
		return errors.New("--shutdown-timeout must be positive")
	case r.heartbeatEvery <= 0:
		return fmt.Errorf("--heartbeat-interval must be positive, got %s", r.heartbeatEvery)
	case r.agentTTL < 2*r.heartbeatEvery:
		return fmt.Errorf("--agent-ttl (%s) must be at least twice --heartbeat-interval (%s), so that one late heartbeat does not make the agent look dead", r.agentTTL, r.heartbeatEvery)
	case r.agentTTL >= agentPruneAfter:
		return fmt.Errorf("--agent-ttl (%s) must be less than %s: agents silent that long are removed", r.agentTTL, agentPruneAfter)
	}
	if _, _, err := net.SplitHostPort(r.httpAddr); err != nil {
		return fmt.Errorf("--http-addr %q is not HOST:PORT (e.g. %s): %w", r.httpAddr, defaultAgentAddr, err)
	}
	return nil
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
	logger.Info("starting berth agent", "agent-id", run.agentID, "database", location.String())
	set, setJSON, source, err := loadProvisionerSet(opts, logger)
	if err != nil {
		return err
	}
	if err := set.Close(); err != nil {
		return err
	}
	registry := newRegistry()
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

	clk := clock.WallClock
	engine, err := manifolds.NewEngine(manifolds.Config{
		Clock:                clk,
		Logger:               logger,
		Rand:                 rand.Float64, // goroutine-safe
		HTTPAddr:             run.httpAddr,
		Profiling:            run.pprof,
		Version:              version,
		DatabaseURL:          dbURL,
		OpenDatabase:         manifolds.StoreOpener(logger),
		ProvisionerSetJSON:   setJSON,
		ProvisionerSetOrigin: source,
		ProvisionersFile:     opts.provisionersFile,
		ReloadSignals:        reload,
		DefaultProvisioner:   opts.defaultProvisioner,
		SetBuilder:           registry,
		ResourceTypes:        registry.Catalog().TypeNames(),
		Provisioner: manifolds.ProvisionerSettings{
			Holder:           run.agentID,
			Concurrency:      run.concurrency,
			AwaitConcurrency: run.awaitConcurrency,
			LeaseTTL:         run.leaseTTL,
			ReconcileTimeout: run.reconcileTimeout,
			BackoffBase:      run.backoffBase,
			BackoffMax:       run.backoffMax,
			CapacityRetry:    run.capacityRetry,
			TracerProvider:   tracer,
		},
		Watcher: manifolds.WatcherSettings{
			PollInterval: run.pollInterval,
			GapTimeout:   time.Minute,
			BatchSize:    1000,
		},
		Health: manifolds.HealthSettings{
			Interval:    run.healthInterval,
			Concurrency: run.healthParallel,
		},
		Capacity: manifolds.CapacitySettings{
			Interval:  run.capacityInterval,
			WarnTotal: run.capacityWarnAll,
			WarnHost:  run.capacityWarnHost,
		},
		Membership: manifolds.MembershipSettings{
			HeartbeatInterval: run.heartbeatEvery,
			AgentTTL:          run.agentTTL,
			PruneAfter:        agentPruneAfter,
		},
		ChangeLogRetain: run.changeLogRetain,
		HistoryRetain:   run.eventRetain,
	})
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
	case <-clk.After(run.shutdownTimeout):
		return fmt.Errorf("workers did not stop within --shutdown-timeout %s; exiting anyway (leases expire after --lease-ttl)", run.shutdownTimeout)
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
