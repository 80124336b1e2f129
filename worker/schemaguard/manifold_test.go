package schemaguard_test

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
	"github.com/berth-dev/berth/worker/schemaguard"
)

type manifoldSuite struct {
	config  schemaguard.ManifoldConfig
	clock   *testclock.Clock
	state   domain.State
	started []schemaguard.Config
}

var _ = gc.Suite(&manifoldSuite{})

// stubState is the store the manifold hands on; the worker is not started here.
type stubState struct{ domain.State }

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Now())
	s.state = stubState{}
	s.started = nil
	s.config = schemaguard.ManifoldConfig{
		ClockName:    "clock",
		DatabaseName: "database",
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Settings:     schemaguard.Settings{Interval: 2 * time.Second, Timeout: 5 * time.Second},
		NewWorker: func(config schemaguard.Config) (worker.Worker, error) {
			s.started = append(s.started, config)
			return workertest.NewErrorWorker(nil), nil
		},
	}
}

func (s *manifoldSuite) getter(overrides map[string]any) dependency.Getter {
	resources := map[string]any{"clock": s.clock, "database": s.state}
	for name, value := range overrides {
		resources[name] = value
	}
	return dt.StubGetter(resources)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(schemaguard.Manifold(s.config).Inputs, gc.DeepEquals, []string{"clock", "database"})
}

func (s *manifoldSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*schemaguard.ManifoldConfig)
		field  string
	}{
		{func(cfg *schemaguard.ManifoldConfig) { cfg.ClockName = "" }, "ClockName"},
		{func(cfg *schemaguard.ManifoldConfig) { cfg.DatabaseName = "" }, "DatabaseName"},
		{func(cfg *schemaguard.ManifoldConfig) { cfg.Logger = nil }, "Logger"},
		{func(cfg *schemaguard.ManifoldConfig) { cfg.NewWorker = nil }, "NewWorker"},
		{func(cfg *schemaguard.ManifoldConfig) { cfg.Interval = 0 }, "Interval 0s"},
	} {
		config := s.config
		t.mutate(&config)
		w, err := schemaguard.Manifold(config).Start(context.Background(), s.getter(nil))
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestStartsOnTheStoreAndClock(c *gc.C) {
	w, err := schemaguard.Manifold(s.config).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)
	c.Assert(s.started, gc.HasLen, 1)
	c.Check(s.started[0].Store, gc.Equals, schemaguard.Store(s.state))
	c.Check(s.started[0].Clock, gc.Equals, s.clock)
	c.Check(s.started[0].Settings, gc.Equals, s.config.Settings)
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	for _, name := range []string{"clock", "database"} {
		_, err := schemaguard.Manifold(s.config).Start(context.Background(), s.getter(map[string]any{name: dependency.ErrMissing}))
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true, gc.Commentf("without %s: %v", name, err))
	}
	c.Check(s.started, gc.HasLen, 0)
}

// The manifold's output is its worker's flag.
func (s *manifoldSuite) TestOutputsTheFlag(c *gc.C) {
	manifold := schemaguard.Manifold(s.config)
	var flag schemaguard.Flag
	c.Check(manifold.Output(workertest.NewErrorWorker(nil), &flag), gc.ErrorMatches, ".*expected a Flag worker.*")
	c.Assert(manifold.Output(fixedFlag{true}, &flag), gc.IsNil)
	c.Check(flag.Check(), gc.Equals, true)
	var other worker.Worker
	c.Check(manifold.Output(fixedFlag{true}, &other), gc.ErrorMatches, ".*expected \\*schemaguard.Flag.*")
}

// A gated manifold takes the guard as one more input and starts only while its flag is
// true.
func (s *manifoldSuite) TestGate(c *gc.C) {
	starts := 0
	gated := schemaguard.Gate("schema-guard", dependency.Manifold{
		Inputs: []string{"database"},
		Start: func(context.Context, dependency.Getter) (worker.Worker, error) {
			starts++
			return workertest.NewErrorWorker(nil), nil
		},
	})
	c.Check(gated.Inputs, gc.DeepEquals, []string{"database", "schema-guard"})

	for _, guard := range []any{dependency.ErrMissing, schemaguard.Flag(fixedFlag{false})} {
		_, err := gated.Start(context.Background(), s.getter(map[string]any{"schema-guard": guard}))
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true, gc.Commentf("guard %v: err = %v", guard, err))
	}
	c.Check(starts, gc.Equals, 0)

	w, err := gated.Start(context.Background(), s.getter(map[string]any{"schema-guard": schemaguard.Flag(fixedFlag{true})}))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)
	c.Check(starts, gc.Equals, 1)
}

// fixedFlag is a flag worker whose flag never changes.
type fixedFlag struct{ known bool }

func (f fixedFlag) Check() bool { return f.known }
func (fixedFlag) Kill()         {}
func (fixedFlag) Wait() error   { return nil }
