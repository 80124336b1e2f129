package environcheck_test

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

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/environcheck"
)

type manifoldSuite struct {
	config  environcheck.ManifoldConfig
	clock   *testclock.Clock
	set     *environ.Set
	started []environcheck.Config
}

var _ = gc.Suite(&manifoldSuite{})

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Now())
	s.set = &environ.Set{Default: "pool", Environs: map[string]environ.Environ{}}
	s.started = nil
	s.config = environcheck.ManifoldConfig{
		ClockName:    "clock",
		EnvironsName: "environs",
		Settings: environcheck.Settings{
			Interval:     time.Minute,
			CheckTimeout: 30 * time.Second,
		},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: &fakeMetrics{},
		NewWorker: func(config environcheck.Config) (worker.Worker, error) {
			s.started = append(s.started, config)
			return workertest.NewErrorWorker(nil), nil
		},
	}
}

func (s *manifoldSuite) getter(overrides map[string]any) dependency.Getter {
	resources := map[string]any{"clock": s.clock, "environs": s.set}
	for name, value := range overrides {
		resources[name] = value
	}
	return dt.StubGetter(resources)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(environcheck.Manifold(s.config).Inputs, gc.DeepEquals, []string{"clock", "environs"})
}

func (s *manifoldSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*environcheck.ManifoldConfig)
		field  string
	}{
		{func(cfg *environcheck.ManifoldConfig) { cfg.ClockName = "" }, "ClockName"},
		{func(cfg *environcheck.ManifoldConfig) { cfg.EnvironsName = "" }, "EnvironsName"},
		{func(cfg *environcheck.ManifoldConfig) { cfg.Logger = nil }, "Logger"},
		{func(cfg *environcheck.ManifoldConfig) { cfg.Metrics = nil }, "Metrics"},
		{func(cfg *environcheck.ManifoldConfig) { cfg.CheckTimeout = 0 }, "CheckTimeout 0s"},
		{func(cfg *environcheck.ManifoldConfig) { cfg.NewWorker = nil }, "NewWorker"},
	} {
		config := s.config
		t.mutate(&config)
		w, err := environcheck.Manifold(config).Start(context.Background(), s.getter(nil))
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	for _, name := range []string{"clock", "environs"} {
		w, err := environcheck.Manifold(s.config).Start(context.Background(), s.getter(map[string]any{name: dependency.ErrMissing}))
		workertest.CheckNilOrKill(c, w)
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true, gc.Commentf("input %q", name))
	}
	c.Check(s.started, gc.HasLen, 0)
}

func (s *manifoldSuite) TestStartsWorker(c *gc.C) {
	w, err := environcheck.Manifold(s.config).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)
	c.Assert(s.started, gc.HasLen, 1)
	config := s.started[0]
	c.Check(config.Environs, gc.Equals, s.set)
	c.Check(config.Clock, gc.Equals, s.clock)
	c.Check(config.Interval, gc.Equals, time.Minute)
	c.Check(config.CheckTimeout, gc.Equals, 30*time.Second)
	c.Check(config.Validate(), gc.IsNil)
}
