package leadership_test

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
	"github.com/berth-dev/berth/worker/leadership"
	"github.com/berth-dev/berth/worker/membership"
)

type manifoldSuite struct {
	config   leadership.ManifoldConfig
	clock    *testclock.Clock
	state    *stubState
	store    *fakeStore
	released int
	started  []leadership.Config
}

var _ = gc.Suite(&manifoldSuite{})

// stubState is the agent's store; the flag worker claims through its fake store.
type stubState struct {
	domain.State
	store *fakeStore
}

func (s *stubState) ClaimLeadership(ctx context.Context, id string, session int64, ttl time.Duration) (string, bool, error) {
	return s.store.ClaimLeadership(ctx, id, session, ttl)
}

func (s *stubState) ResignLeadership(ctx context.Context, id string, session int64) error {
	return s.store.ResignLeadership(ctx, id, session)
}

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Now())
	s.store = &fakeStore{claims: make(chan claimResult, 10), calls: make(chan string, 10), session: make(chan int64, 10)}
	s.state = &stubState{store: s.store}
	s.released = 0
	s.started = nil
	s.config = leadership.ManifoldConfig{
		ClockName:      "clock",
		DatabaseName:   "database",
		MembershipName: "membership",
		Settings: leadership.Settings{
			Agent:    domain.AgentIdentity{ID: "agent-a", TTL: 15 * time.Second},
			Interval: 2 * time.Second,
			Timeout:  10 * time.Second,
		},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: &fakeMetrics{},
		NewWorker: func(config leadership.Config) (*leadership.Worker, error) {
			s.started = append(s.started, config)
			return leadership.NewWorker(config)
		},
	}
}

func (s *manifoldSuite) getter(overrides map[string]any) dependency.Getter {
	resources := map[string]any{
		"clock":      s.clock,
		"database":   database.NewHold(s.state, func() { s.released++ }),
		"membership": membership.Registration(fakeRegistration(7)),
	}
	for name, value := range overrides {
		resources[name] = value
	}
	return dt.StubGetter(resources)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(leadership.Manifold(s.config).Inputs, gc.DeepEquals, []string{"clock", "database", "membership"})
}

func (s *manifoldSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*leadership.ManifoldConfig)
		field  string
	}{
		{func(cfg *leadership.ManifoldConfig) { cfg.ClockName = "" }, "ClockName"},
		{func(cfg *leadership.ManifoldConfig) { cfg.DatabaseName = "" }, "DatabaseName"},
		{func(cfg *leadership.ManifoldConfig) { cfg.MembershipName = "" }, "MembershipName"},
		{func(cfg *leadership.ManifoldConfig) { cfg.Agent.ID = "" }, "agent ID .*--agent-id"},
		{func(cfg *leadership.ManifoldConfig) { cfg.Interval = 0 }, "Interval 0s"},
		{func(cfg *leadership.ManifoldConfig) { cfg.Agent.TTL = 0 }, "agent TTL 0s"},
		{func(cfg *leadership.ManifoldConfig) { cfg.Timeout = 0 }, "Timeout 0s"},
		{func(cfg *leadership.ManifoldConfig) { cfg.Logger = nil }, "Logger"},
		{func(cfg *leadership.ManifoldConfig) { cfg.Metrics = nil }, "Metrics"},
		{func(cfg *leadership.ManifoldConfig) { cfg.NewWorker = nil }, "NewWorker"},
	} {
		config := s.config
		t.mutate(&config)
		w, err := leadership.Manifold(config).Start(context.Background(), s.getter(nil))
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	for _, name := range []string{"clock", "database", "membership"} {
		w, err := leadership.Manifold(s.config).Start(context.Background(), s.getter(map[string]any{name: dependency.ErrMissing}))
		workertest.CheckNilOrKill(c, w)
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true, gc.Commentf("input %q", name))
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestStartsTheFlagAndRemembersTheLeader(c *gc.C) {
	manifold := leadership.Manifold(s.config)
	s.store.claims <- claimResult{leader: "agent-b"}
	w, err := manifold.Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	var flag leadership.Flag
	c.Assert(manifold.Output(w, &flag), gc.IsNil)
	c.Check(flag.Check(), gc.Equals, false)
	var wrong int
	c.Check(manifold.Output(w, &wrong), gc.ErrorMatches, `.*expected \*leadership.Flag, got \*int`)
	workertest.CleanKill(c, w)
	c.Check(s.released, gc.Equals, 1)

	s.store.claims <- claimResult{leader: "agent-a", mine: true}
	w, err = manifold.Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	c.Assert(manifold.Output(w, &flag), gc.IsNil)
	c.Check(flag.Check(), gc.Equals, true)
	workertest.CleanKill(c, w)

	c.Assert(s.started, gc.HasLen, 2)
	c.Check(s.started[0].Previous, gc.Equals, "")
	c.Check(s.started[1].Previous, gc.Equals, "agent-b")
	c.Check(s.started[1].Store, gc.Equals, s.state)
	c.Check(s.started[1].Settings, gc.Equals, s.config.Settings)
}

type flagValue bool

func (f flagValue) Check() bool { return bool(f) }

func (f flagValue) Term() domain.Term { return domain.Term{Holder: "agent-a", Session: 7} }

func (s *manifoldSuite) TestTermOfReadsTheLeadersTerm(c *gc.C) {
	term, err := leadership.TermOf(dt.StubGetter(map[string]any{"leader": leadership.Flag(flagValue(true))}), "leader")
	c.Assert(err, gc.IsNil)
	c.Check(term, gc.Equals, domain.Term{Holder: "agent-a", Session: 7})
	_, err = leadership.TermOf(dt.StubGetter(map[string]any{"leader": leadership.Flag(flagValue(false))}), "leader")
	c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)
}

func (s *manifoldSuite) TestGateTakesTheFlagOnce(c *gc.C) {
	gated := leadership.Gate("leader", dependency.Manifold{Inputs: []string{"clock", "leader"}})
	c.Check(gated.Inputs, gc.DeepEquals, []string{"clock", "leader"})
}

func (s *manifoldSuite) TestGateStartsOnlyOnTheLeader(c *gc.C) {
	starts := 0
	gated := leadership.Gate("leader", dependency.Manifold{
		Inputs: []string{"clock"},
		Start: func(context.Context, dependency.Getter) (worker.Worker, error) {
			starts++
			return workertest.NewErrorWorker(nil), nil
		},
	})
	c.Check(gated.Inputs, gc.DeepEquals, []string{"clock", "leader"})

	w, err := gated.Start(context.Background(), dt.StubGetter(map[string]any{"leader": leadership.Flag(flagValue(false))}))
	workertest.CheckNilOrKill(c, w)
	c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)
	c.Check(starts, gc.Equals, 0)

	w, err = gated.Start(context.Background(), dt.StubGetter(map[string]any{"leader": dependency.ErrMissing}))
	workertest.CheckNilOrKill(c, w)
	c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)

	w, err = gated.Start(context.Background(), dt.StubGetter(map[string]any{"leader": leadership.Flag(flagValue(true))}))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)
	c.Check(starts, gc.Equals, 1)
}
