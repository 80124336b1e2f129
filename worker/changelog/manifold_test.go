package changelog_test

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
	"github.com/berth-dev/berth/worker/changelog"
	"github.com/berth-dev/berth/worker/leadership"
)

type manifoldSuite struct {
	config  changelog.ManifoldConfig
	clock   *testclock.Clock
	state   *stubState
	started []changelog.Config
}

var _ = gc.Suite(&manifoldSuite{})

// stubState stands in for the agent's store; the manifold only passes it on.
type stubState struct{ domain.State }

// leader is a leadership flag of agent-a's session 3.
type leader bool

func (l leader) Check() bool       { return bool(l) }
func (l leader) Term() domain.Term { return domain.Term{Holder: "agent-a", Session: 3} }

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Now())
	s.state = &stubState{}
	s.started = nil
	s.config = changelog.ManifoldConfig{
		ClockName:      "clock",
		DatabaseName:   "database",
		LeadershipName: "leadership",
		Settings: changelog.Settings{
			Interval:      time.Hour,
			Retain:        24 * time.Hour,
			HistoryRetain: 7 * 24 * time.Hour,
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewWorker: func(config changelog.Config) (worker.Worker, error) {
			s.started = append(s.started, config)
			return workertest.NewErrorWorker(nil), nil
		},
	}
}

func (s *manifoldSuite) getter(overrides map[string]any) dependency.Getter {
	resources := map[string]any{
		"clock":      s.clock,
		"database":   s.state,
		"leadership": leadership.Flag(leader(true)),
	}
	for name, value := range overrides {
		resources[name] = value
	}
	return dt.StubGetter(resources)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(changelog.Manifold(s.config).Inputs, gc.DeepEquals, []string{"clock", "database", "leadership"})
}

func (s *manifoldSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*changelog.ManifoldConfig)
		field  string
	}{
		{func(cfg *changelog.ManifoldConfig) { cfg.ClockName = "" }, "ClockName"},
		{func(cfg *changelog.ManifoldConfig) { cfg.DatabaseName = "" }, "DatabaseName"},
		{func(cfg *changelog.ManifoldConfig) { cfg.LeadershipName = "" }, "LeadershipName"},
		{func(cfg *changelog.ManifoldConfig) { cfg.Interval = 0 }, "Interval 0s"},
		{func(cfg *changelog.ManifoldConfig) { cfg.Retain = -time.Hour }, "Retain -1h0m0s"},
		{func(cfg *changelog.ManifoldConfig) { cfg.HistoryRetain = 0 }, "HistoryRetain 0s"},
		{func(cfg *changelog.ManifoldConfig) { cfg.Logger = nil }, "Logger"},
		{func(cfg *changelog.ManifoldConfig) { cfg.NewWorker = nil }, "NewWorker"},
	} {
		config := s.config
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := changelog.Manifold(config).Start(context.Background(), s.getter(nil))
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.config.Validate(), gc.IsNil)
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	for _, name := range []string{"clock", "database", "leadership"} {
		getter := s.getter(map[string]any{name: dependency.ErrMissing})
		w, err := changelog.Manifold(s.config).Start(context.Background(), getter)
		workertest.CheckNilOrKill(c, w)
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true, gc.Commentf("input %q", name))
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestStartsOnlyOnTheLeader(c *gc.C) {
	w, err := changelog.Manifold(s.config).Start(context.Background(), s.getter(map[string]any{"leadership": leadership.Flag(leader(false))}))
	workertest.CheckNilOrKill(c, w)
	c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestStartsWorker(c *gc.C) {
	w, err := changelog.Manifold(s.config).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)

	c.Assert(s.started, gc.HasLen, 1)
	config := s.started[0]
	c.Check(config.Pruner, gc.Equals, s.state)
	c.Check(config.Clock, gc.Equals, s.clock)
	c.Check(config.Logger, gc.Equals, s.config.Logger)
	c.Check(config.Interval, gc.Equals, time.Hour)
	c.Check(config.Retain, gc.Equals, 24*time.Hour)
	c.Check(config.HistoryRetain, gc.Equals, 7*24*time.Hour)
	c.Check(config.Term, gc.Equals, domain.Term{Holder: "agent-a", Session: 3})
	c.Check(config.Validate(), gc.IsNil)
}
