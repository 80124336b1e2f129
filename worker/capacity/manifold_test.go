package capacity_test

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
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/capacity"
	"github.com/berth-dev/berth/worker/leadership"
)

type manifoldSuite struct {
	clock   *testclock.Clock
	state   *stubState
	set     *environ.Set
	config  capacity.ManifoldConfig
	started []capacity.Config
}

var _ = gc.Suite(&manifoldSuite{})

// stubState stands in for the agent's store; the manifold only passes it on.
type stubState struct{ domain.State }

// leader is a leadership flag of agent-a's session 3.
type leader bool

func (l leader) Check() bool       { return bool(l) }
func (l leader) Term() domain.Term { return domain.Term{Holder: "agent-a", Session: 3} }

func (s *manifoldSuite) TestStartsOnlyOnTheLeader(c *gc.C) {
	w, err := capacity.Manifold(s.config).Start(context.Background(), s.getter(map[string]any{"leadership": leadership.Flag(leader(false))}))
	workertest.CheckNilOrKill(c, w)
	c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Now())
	s.state = &stubState{}
	s.set = &environ.Set{Default: "pool", Environs: map[string]environ.Environ{}}
	s.started = nil
	s.config = capacity.ManifoldConfig{
		ClockName:      "clock",
		DatabaseName:   "database",
		EnvironsName:   "environs",
		LeadershipName: "leadership",
		Settings: capacity.Settings{
			Interval:   time.Minute,
			Timeout:    30 * time.Second,
			Thresholds: capacity.Thresholds{Total: 0.8, Host: 0.7},
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewWorker: func(config capacity.Config) (worker.Worker, error) {
			s.started = append(s.started, config)
			return workertest.NewErrorWorker(nil), nil
		},
	}
}

func (s *manifoldSuite) getter(overrides map[string]any) dependency.Getter {
	resources := map[string]any{"clock": s.clock, "database": s.state, "environs": s.set, "leadership": leadership.Flag(leader(true))}
	for name, value := range overrides {
		resources[name] = value
	}
	return dt.StubGetter(resources)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(capacity.Manifold(s.config).Inputs, gc.DeepEquals, []string{"clock", "database", "environs", "leadership"})
}

func (s *manifoldSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*capacity.ManifoldConfig)
		field  string
	}{
		{func(cfg *capacity.ManifoldConfig) { cfg.ClockName = "" }, "ClockName"},
		{func(cfg *capacity.ManifoldConfig) { cfg.DatabaseName = "" }, "DatabaseName"},
		{func(cfg *capacity.ManifoldConfig) { cfg.EnvironsName = "" }, "EnvironsName"},
		{func(cfg *capacity.ManifoldConfig) { cfg.LeadershipName = "" }, "LeadershipName"},
		{func(cfg *capacity.ManifoldConfig) { cfg.Logger = nil }, "Logger"},
		{func(cfg *capacity.ManifoldConfig) { cfg.Interval = 0 }, "Interval 0s"},
		{func(cfg *capacity.ManifoldConfig) { cfg.Thresholds.Host = 2 }, "Thresholds.Host 2"},
		{func(cfg *capacity.ManifoldConfig) { cfg.NewWorker = nil }, "NewWorker"},
	} {
		config := s.config
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := capacity.Manifold(config).Start(context.Background(), s.getter(nil))
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	for _, name := range []string{"clock", "database", "environs", "leadership"} {
		w, err := capacity.Manifold(s.config).Start(context.Background(), s.getter(map[string]any{name: dependency.ErrMissing}))
		workertest.CheckNilOrKill(c, w)
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true, gc.Commentf("input %q", name))
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestStartsWorker(c *gc.C) {
	w, err := capacity.Manifold(s.config).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)
	c.Assert(s.started, gc.HasLen, 1)
	config := s.started[0]
	c.Check(config.Store, gc.Equals, s.state)
	c.Check(config.Environs, gc.Equals, s.set)
	c.Check(config.Clock, gc.Equals, s.clock)
	c.Check(config.Interval, gc.Equals, time.Minute)
	c.Check(config.Timeout, gc.Equals, 30*time.Second)
	c.Check(config.Thresholds, gc.Equals, capacity.Thresholds{Total: 0.8, Host: 0.7})
	c.Check(config.Observer, gc.IsNil)
	c.Check(config.Term, gc.Equals, domain.Term{Holder: "agent-a", Session: 3})
	c.Check(config.Validate(), gc.IsNil)
}
