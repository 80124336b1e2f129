package membership_test

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
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/database"
	"github.com/berth-dev/berth/worker/membership"
)

type manifoldSuite struct {
	config   membership.ManifoldConfig
	clock    *testclock.Clock
	state    *stubState
	released int // how often the hold on the store was released
	started  []membership.Config
}

var _ = gc.Suite(&manifoldSuite{})

// stubState stands in for the agent's store; the manifold only passes it on.
type stubState struct{ domain.State }

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Now())
	s.state = &stubState{}
	s.released = 0
	s.started = nil
	s.config = membership.ManifoldConfig{
		ClockName:    "clock",
		DatabaseName: "database",
		Settings: membership.Settings{
			Agent:             domain.AgentInfo{ID: "agent-a", Version: "v1", HTTPAddr: "127.0.0.1:8080"},
			HeartbeatInterval: 2 * time.Second,
			TTL:               15 * time.Second,
			Timeout:           10 * time.Second,
			ResignTimeout:     5 * time.Second,
			PruneInterval:     time.Hour,
			PruneAfter:        24 * time.Hour,
		},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: &fakeMetrics{},
		NewWorker: func(config membership.Config) (worker.Worker, error) {
			s.started = append(s.started, config)
			return workertest.NewErrorWorker(nil), nil
		},
	}
}

func (s *manifoldSuite) getter(overrides map[string]any) dependency.Getter {
	resources := map[string]any{
		"clock":    s.clock,
		"database": database.NewHold(s.state, func() { s.released++ }),
	}
	for name, value := range overrides {
		resources[name] = value
	}
	return dt.StubGetter(resources)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(membership.Manifold(s.config).Inputs, gc.DeepEquals, []string{"clock", "database"})
}

func (s *manifoldSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*membership.ManifoldConfig)
		field  string
	}{
		{func(cfg *membership.ManifoldConfig) { cfg.ClockName = "" }, "ClockName"},
		{func(cfg *membership.ManifoldConfig) { cfg.DatabaseName = "" }, "DatabaseName"},
		{func(cfg *membership.ManifoldConfig) { cfg.Agent.ID = "" }, "Agent.ID .*is empty"},
		{func(cfg *membership.ManifoldConfig) { cfg.HeartbeatInterval = 0 }, "HeartbeatInterval 0s"},
		{func(cfg *membership.ManifoldConfig) { cfg.TTL = -time.Second }, "TTL -1s .*at least twice HeartbeatInterval"},
		{func(cfg *membership.ManifoldConfig) { cfg.Timeout = 0 }, "Timeout 0s"},
		{func(cfg *membership.ManifoldConfig) { cfg.ResignTimeout = 0 }, "ResignTimeout 0s"},
		{func(cfg *membership.ManifoldConfig) { cfg.PruneInterval = 0 }, "PruneInterval 0s"},
		{func(cfg *membership.ManifoldConfig) { cfg.PruneAfter = 0 }, "PruneAfter 0s"},
		{func(cfg *membership.ManifoldConfig) { cfg.Logger = nil }, "Logger"},
		{func(cfg *membership.ManifoldConfig) { cfg.Metrics = nil }, "Metrics"},
		{func(cfg *membership.ManifoldConfig) { cfg.NewWorker = nil }, "NewWorker"},
	} {
		config := s.config
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := membership.Manifold(config).Start(context.Background(), s.getter(nil))
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.config.Validate(), gc.IsNil)
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	for _, name := range []string{"clock", "database"} {
		getter := s.getter(map[string]any{name: dependency.ErrMissing})
		w, err := membership.Manifold(s.config).Start(context.Background(), getter)
		workertest.CheckNilOrKill(c, w)
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true, gc.Commentf("input %q", name))
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestFailedStartReleasesTheStore(c *gc.C) {
	s.config.NewWorker = func(membership.Config) (worker.Worker, error) { return nil, errors.New("no worker") }
	w, err := membership.Manifold(s.config).Start(context.Background(), s.getter(nil))
	workertest.CheckNilOrKill(c, w)
	c.Check(err, gc.ErrorMatches, "no worker")
	c.Check(s.released, gc.Equals, 1)
}

func (s *manifoldSuite) TestReportsTheWorkersReport(c *gc.C) {
	s.config.NewWorker = func(membership.Config) (worker.Worker, error) {
		return &reportingStub{workertest.NewErrorWorker(nil)}, nil
	}
	w, err := membership.Manifold(s.config).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	r, ok := w.(interface{ Report() map[string]any })
	c.Assert(ok, gc.Equals, true)
	c.Check(r.Report(), gc.DeepEquals, map[string]any{"id": "agent-a"})
}

// reportingStub is a worker with a report.
type reportingStub struct{ worker.Worker }

func (reportingStub) Report() map[string]any { return map[string]any{"id": "agent-a"} }

func (s *manifoldSuite) TestStartsWorker(c *gc.C) {
	s.config.Provisioners = func() []string { return []string{"static"} }
	w, err := membership.Manifold(s.config).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	c.Check(s.released, gc.Equals, 0)
	workertest.CleanKill(c, w)
	c.Check(s.released, gc.Equals, 1, gc.Commentf("the hold on the store is released once the worker stopped"))

	c.Assert(s.started, gc.HasLen, 1)
	config := s.started[0]
	c.Check(config.Store, gc.Equals, s.state)
	c.Check(config.Clock, gc.Equals, s.clock)
	c.Check(config.Logger, gc.Equals, s.config.Logger)
	c.Check(config.Metrics, gc.Equals, s.config.Metrics)
	c.Check(config.Settings, gc.Equals, s.config.Settings)
	c.Check(config.Provisioners(), gc.DeepEquals, []string{"static"})
	c.Check(config.Validate(), gc.IsNil)
}

func (s *manifoldSuite) TestOutputsTheRegistration(c *gc.C) {
	s.config.NewWorker = func(membership.Config) (worker.Worker, error) {
		return &sessionStub{workertest.NewErrorWorker(nil)}, nil
	}
	manifold := membership.Manifold(s.config)
	w, err := manifold.Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	var reg membership.Registration
	c.Assert(manifold.Output(w, &reg), gc.IsNil)
	c.Check(reg.Session(), gc.Equals, int64(42))
	var wrong int
	c.Check(manifold.Output(w, &wrong), gc.ErrorMatches, `.*expected \*membership.Registration, got \*int`)
}

// sessionStub is a worker registered under session 42.
type sessionStub struct{ worker.Worker }

func (sessionStub) Session() int64 { return 42 }

func (sessionStub) Registered() <-chan struct{} { return nil }
