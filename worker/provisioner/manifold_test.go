package provisioner_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/juju/clock"
	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	dt "github.com/juju/worker/v4/dependency/testing"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/provisioner"
)

type manifoldSuite struct {
	clock   *testclock.Clock
	state   domain.State
	set     *environ.Set
	logger  *slog.Logger
	metrics *fakeMetrics
	locks   *resourcelock.Set
}

var _ = gc.Suite(&manifoldSuite{})

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(epoch)
	s.state = stubState{}
	s.set = &environ.Set{Default: "pool", Environs: map[string]environ.Environ{"pool": newFakeEnviron()}, Catalog: shippedCatalog()}
	s.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s.metrics = newFakeMetrics()
	s.locks = new(resourcelock.Set)
}

// stubState stands in for the database's output; the manifold only passes it on, and the
// worker it starts lists the agents once (none but itself) and the owners' policies (none).
type stubState struct{ domain.State }

func (stubState) ListAgents(context.Context, time.Duration) ([]domain.Agent, error) { return nil, nil }

func (stubState) ListOwnerPolicies(context.Context) ([]domain.OwnerPolicy, error) { return nil, nil }

func (s *manifoldSuite) config() provisioner.ManifoldConfig {
	return provisioner.ManifoldConfig{
		ClockName:    "clock",
		DatabaseName: "database",
		EnvironsName: "environs",
		Settings: provisioner.Settings{
			Agent:            domain.AgentIdentity{ID: holder, TTL: 15 * time.Second},
			Concurrency:      4,
			AwaitConcurrency: 8,
			LeaseTTL:         leaseTTL,
			ReconcileTimeout: reconcileTimeout,
			BackoffBase:      backoffBase,
			BackoffMax:       backoffMax,
			CapacityRetry:    capacityRetry,
			ShareGrace:       2 * time.Second,

			OwnerPoliciesInterval: 10 * time.Second,
		},
		Logger:  s.logger,
		Rand:    func() float64 { return 0.25 },
		Metrics: s.metrics,
		Locks:   s.locks,
		NewWorker: func(provisioner.Config) (worker.Worker, error) {
			return nil, errors.New("NewWorker not expected")
		},
		NewWatcher: func(domain.State, clock.Clock, *slog.Logger) (provisioner.Watcher, error) {
			return nil, errors.New("NewWatcher not expected")
		},
	}
}

func (s *manifoldSuite) getter(overrides map[string]any) dependency.Getter {
	resources := map[string]any{
		"clock":    s.clock,
		"database": s.state,
		"environs": s.set,
	}
	for k, v := range overrides {
		resources[k] = v
	}
	return dt.StubGetter(resources)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(provisioner.Manifold(s.config()).Inputs, gc.DeepEquals, []string{"clock", "database", "environs"})
}

// A manifold config names its inputs and functions and carries valid Settings; whatever is
// wrong is NotValid and named.
func (s *manifoldSuite) TestValidate(c *gc.C) {
	for i, t := range []struct {
		change func(*provisioner.ManifoldConfig)
		field  string
	}{
		{func(m *provisioner.ManifoldConfig) { m.ClockName = "" }, "ClockName"},
		{func(m *provisioner.ManifoldConfig) { m.DatabaseName = "" }, "DatabaseName"},
		{func(m *provisioner.ManifoldConfig) { m.EnvironsName = "" }, "EnvironsName"},
		{func(m *provisioner.ManifoldConfig) { m.Agent.ID = "" }, "agent ID .*--agent-id"},
		{func(m *provisioner.ManifoldConfig) { m.Concurrency = 0 }, "Concurrency 0"},
		{func(m *provisioner.ManifoldConfig) { m.LeaseTTL = 0 }, "LeaseTTL 0s"},
		{func(m *provisioner.ManifoldConfig) { m.ReconcileTimeout = 0 }, "ReconcileTimeout 0s"},
		{func(m *provisioner.ManifoldConfig) { m.BackoffBase = 0 }, "BackoffBase 0s"},
		{func(m *provisioner.ManifoldConfig) { m.BackoffMax = 0 }, "BackoffMax 0s"},
		{func(m *provisioner.ManifoldConfig) { m.CapacityRetry = 0 }, "CapacityRetry 0s"},
		{func(m *provisioner.ManifoldConfig) { m.Agent.TTL = 0 }, "agent TTL 0s .*--agent-ttl"},
		{func(m *provisioner.ManifoldConfig) { m.ShareGrace = 0 }, "ShareGrace 0s .*--heartbeat-interval"},
		{func(m *provisioner.ManifoldConfig) { m.Logger = nil }, "Logger"},
		{func(m *provisioner.ManifoldConfig) { m.Rand = nil }, "Rand"},
		{func(m *provisioner.ManifoldConfig) { m.Metrics = nil }, "Metrics"},
		{func(m *provisioner.ManifoldConfig) { m.Locks = nil }, "Locks .*health checker"},
		{func(m *provisioner.ManifoldConfig) { m.NewWorker = nil }, "NewWorker"},
		{func(m *provisioner.ManifoldConfig) { m.NewWatcher = nil }, "NewWatcher"},
	} {
		c.Logf("test %d: %s", i, t.field)
		cfg := s.config()
		t.change(&cfg)
		testkit.CheckNotValid(c, cfg.Validate(), t.field)
		w, err := provisioner.Manifold(cfg).Start(context.Background(), s.getter(nil))
		c.Check(w, gc.IsNil)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.config().Validate(), gc.IsNil)
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	for _, name := range []string{"clock", "database", "environs"} {
		c.Logf("missing %s", name)
		getter := s.getter(map[string]any{name: dependency.ErrMissing})
		w, err := provisioner.Manifold(s.config()).Start(context.Background(), getter)
		c.Check(w, gc.IsNil)
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)
	}
}

func (s *manifoldSuite) TestStart(c *gc.C) {
	cfg := s.config()
	var got provisioner.Config
	cfg.NewWorker = func(config provisioner.Config) (worker.Worker, error) {
		got = config
		return workertest.NewErrorWorker(nil), nil
	}
	watcher := newFakeWatcher()
	defer workertest.CleanKill(c, watcher)
	var watcherArgs []any
	cfg.NewWatcher = func(state domain.State, clk clock.Clock, logger *slog.Logger) (provisioner.Watcher, error) {
		watcherArgs = []any{state, clk, logger}
		return watcher, nil
	}

	w, err := provisioner.Manifold(cfg).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)

	c.Check(got.State, gc.Equals, s.state)
	c.Check(got.Environs, gc.Equals, s.set)
	c.Check(got.Clock, gc.Equals, s.clock)
	c.Check(got.Logger, gc.Equals, s.logger)
	c.Check(got.Rand(), gc.Equals, 0.25)
	c.Check(got.Metrics, gc.Equals, provisioner.Metrics(s.metrics))
	c.Check(got.Locks, gc.Equals, provisioner.Locks(s.locks))
	c.Check(got.Agents, gc.Equals, s.state)
	c.Check(got.Settings, gc.Equals, cfg.Settings)
	c.Check(got.Breakers.Store, gc.IsNil) // no BreakerMetrics: no breakers
	c.Check(got.Validate(), gc.IsNil)

	// The watcher is started by the worker, on the manifold's inputs.
	c.Check(watcherArgs, gc.IsNil)
	started, err := got.NewWatcher()
	c.Assert(err, gc.IsNil)
	c.Check(started, gc.Equals, provisioner.Watcher(watcher))
	c.Check(watcherArgs, gc.DeepEquals, []any{s.state, s.clock, s.logger})
}

func (s *manifoldSuite) TestStartsWorker(c *gc.C) {
	cfg := s.config()
	cfg.NewWorker = provisioner.NewWorker
	watcher := newFakeWatcher()
	cfg.NewWatcher = func(domain.State, clock.Clock, *slog.Logger) (provisioner.Watcher, error) {
		return watcher, nil
	}
	w, err := provisioner.Manifold(cfg).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	workertest.CheckAlive(c, w)
	workertest.CleanKill(c, w)
	workertest.CheckKilled(c, watcher)
}

// With BreakerMetrics the worker keeps the provisioners' breakers in the database, with
// the settings the provisioner set gives each.
func (s *manifoldSuite) TestStartWithBreakers(c *gc.C) {
	cfg := s.config()
	cfg.BreakerMetrics = provisioner.NewFakeBreakerMetrics()
	var got provisioner.Config
	cfg.NewWorker = func(config provisioner.Config) (worker.Worker, error) {
		got = config
		return workertest.NewErrorWorker(nil), nil
	}
	w, err := provisioner.Manifold(cfg).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)

	c.Check(got.Breakers.Store, gc.Equals, provisioner.BreakerStore(s.state))
	c.Check(got.Breakers.Metrics, gc.Equals, cfg.BreakerMetrics)
	settings, on := got.Breakers.Settings("pool")
	c.Check(on, gc.Equals, true)
	c.Check(settings, gc.Equals, domain.DefaultBreakerSettings())
	c.Check(got.Validate(), gc.IsNil)
}
