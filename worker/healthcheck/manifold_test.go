package healthcheck_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

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
	"github.com/berth-dev/berth/worker/healthcheck"
)

type manifoldSuite struct {
	clock   *testclock.Clock
	state   *stubState
	set     *environ.Set
	metrics *fakeMetrics
	locks   *resourcelock.Set
	config  healthcheck.ManifoldConfig
	started []healthcheck.Config
}

var _ = gc.Suite(&manifoldSuite{})

// stubState stands in for the agent's store; the manifold only passes it on.
type stubState struct{ domain.State }

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Now())
	s.state = &stubState{}
	s.set = &environ.Set{Default: "pool", Environs: map[string]environ.Environ{}}
	s.started = nil
	s.metrics = newFakeMetrics()
	s.locks = new(resourcelock.Set)
	s.config = healthcheck.ManifoldConfig{
		ClockName:    "clock",
		DatabaseName: "database",
		EnvironsName: "environs",
		Settings: healthcheck.Settings{
			Agent:        domain.AgentIdentity{ID: "agent-a", TTL: 15 * time.Second},
			Interval:     time.Minute,
			Concurrency:  8,
			PageSize:     500,
			CheckTimeout: 30 * time.Second,
		},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Rand:    func() float64 { return 0.5 },
		Metrics: s.metrics,
		Locks:   s.locks,
		NewWorker: func(config healthcheck.Config) (worker.Worker, error) {
			s.started = append(s.started, config)
			return workertest.NewErrorWorker(nil), nil
		},
	}
}

func (s *manifoldSuite) getter(overrides map[string]any) dependency.Getter {
	resources := map[string]any{"clock": s.clock, "database": s.state, "environs": s.set}
	for name, value := range overrides {
		resources[name] = value
	}
	return dt.StubGetter(resources)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(healthcheck.Manifold(s.config).Inputs, gc.DeepEquals, []string{"clock", "database", "environs"})
}

func (s *manifoldSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*healthcheck.ManifoldConfig)
		field  string
	}{
		{func(cfg *healthcheck.ManifoldConfig) { cfg.ClockName = "" }, "ClockName"},
		{func(cfg *healthcheck.ManifoldConfig) { cfg.DatabaseName = "" }, "DatabaseName"},
		{func(cfg *healthcheck.ManifoldConfig) { cfg.EnvironsName = "" }, "EnvironsName"},
		{func(cfg *healthcheck.ManifoldConfig) { cfg.Logger = nil }, "Logger"},
		{func(cfg *healthcheck.ManifoldConfig) { cfg.Rand = nil }, "Rand"},
		{func(cfg *healthcheck.ManifoldConfig) { cfg.Metrics = nil }, "Metrics"},
		{func(cfg *healthcheck.ManifoldConfig) { cfg.Locks = nil }, "Locks"},
		{func(cfg *healthcheck.ManifoldConfig) { cfg.Agent.ID = "" }, "agent ID .*--agent-id"},
		{func(cfg *healthcheck.ManifoldConfig) { cfg.Agent.TTL = 0 }, "agent TTL 0s .*--agent-ttl"},
		{func(cfg *healthcheck.ManifoldConfig) { cfg.NewWorker = nil }, "NewWorker"},
	} {
		config := s.config
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := healthcheck.Manifold(config).Start(context.Background(), s.getter(nil))
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	for _, name := range []string{"clock", "database", "environs"} {
		w, err := healthcheck.Manifold(s.config).Start(context.Background(), s.getter(map[string]any{name: dependency.ErrMissing}))
		workertest.CheckNilOrKill(c, w)
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true, gc.Commentf("input %q", name))
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestStartsWorker(c *gc.C) {
	w, err := healthcheck.Manifold(s.config).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)
	c.Assert(s.started, gc.HasLen, 1)
	config := s.started[0]
	c.Check(config.Store, gc.Equals, s.state)
	c.Check(config.Environs, gc.Equals, s.set)
	c.Check(config.Clock, gc.Equals, s.clock)
	c.Check(config.Metrics, gc.Equals, healthcheck.Metrics(s.metrics))
	c.Check(config.Locks, gc.Equals, healthcheck.Locks(s.locks))
	c.Check(config.Agents, gc.Equals, healthcheck.AgentLister(s.state))
	c.Check(config.Settings, gc.Equals, s.config.Settings)
	c.Check(config.Validate(), gc.IsNil)
}
