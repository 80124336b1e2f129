package environs_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4/dependency"
	dt "github.com/juju/worker/v4/dependency/testing"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/environs"
)

type manifoldSuite struct {
	builder *fakeBuilder
	source  environs.SetSource
}

var _ = gc.Suite(&manifoldSuite{})

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.builder = newFakeBuilder()
	s.source = newFakeSource(twoPools)
}

func (s *manifoldSuite) config() environs.ManifoldConfig {
	return environs.ManifoldConfig{
		ClockName:          "clock",
		DatabaseName:       "database",
		ProvisionerSetName: "provisioner-set",
		Default:            "pool",
		Builder:            s.builder,
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewWorker:          environs.NewManifoldWorker,
	}
}

func (s *manifoldSuite) manifold() dependency.Manifold {
	return environs.Manifold(s.config())
}

func (s *manifoldSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*environs.ManifoldConfig)
		field  string
	}{
		{func(cfg *environs.ManifoldConfig) { cfg.ClockName = "" }, "ClockName"},
		{func(cfg *environs.ManifoldConfig) { cfg.DatabaseName = "" }, "DatabaseName"},
		{func(cfg *environs.ManifoldConfig) { cfg.ProvisionerSetName = "" }, "ProvisionerSetName"},
		{func(cfg *environs.ManifoldConfig) { cfg.Builder = nil }, "Builder"},
		{func(cfg *environs.ManifoldConfig) { cfg.Logger = nil }, "Logger"},
		{func(cfg *environs.ManifoldConfig) { cfg.NewWorker = nil }, "NewWorker"},
	} {
		config := s.config()
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := environs.Manifold(config).Start(context.Background(), dt.StubGetter(nil))
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.config().Validate(), gc.IsNil)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(s.manifold().Inputs, gc.DeepEquals, []string{"clock", "database", "provisioner-set"})
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	clk := testclock.NewClock(time.Now())
	state := domain.State(fakeState{})
	for _, inputs := range []map[string]any{
		{"clock": dependency.ErrMissing, "database": state, "provisioner-set": s.source},
		{"clock": clk, "database": dependency.ErrMissing, "provisioner-set": s.source},
		{"clock": clk, "database": state, "provisioner-set": dependency.ErrMissing},
	} {
		_, err := s.manifold().Start(context.Background(), dt.StubGetter(inputs))
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)
	}
}

func (s *manifoldSuite) TestOutputsTheSetOfTheSource(c *gc.C) {
	m := s.manifold()
	w, err := m.Start(context.Background(), dt.StubGetter(map[string]any{
		"clock":           testclock.NewClock(time.Now()),
		"database":        domain.State(fakeState{}),
		"provisioner-set": s.source,
	}))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Check(s.builder.gotJSON, gc.Equals, twoPools)
	var set *environ.Set
	c.Assert(m.Output(w, &set), gc.IsNil)
	c.Check(set.Default, gc.Equals, "pool")
	c.Check(set.Names(), gc.DeepEquals, []string{"other", "pool"})
	var wrong *int
	c.Check(m.Output(w, &wrong), gc.NotNil)
}
