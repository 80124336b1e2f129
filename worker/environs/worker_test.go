package environs_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4/dependency"
	dt "github.com/juju/worker/v4/dependency/testing"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/worker/environs"
)

func TestPackage(t *testing.T) { gc.TestingT(t) }

type workerSuite struct {
	builder *fakeBuilder
	slots   domain.SlotStore
}

var _ = gc.Suite(&workerSuite{})

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.builder = &fakeBuilder{env: &fakeEnviron{}}
	s.slots = fakeSlots{}
}

func (s *workerSuite) config() environs.Config {
	return environs.Config{
		SetJSON: []byte(`{"pool": {"type": "fake", "spec": {}}}`),
		Default: "pool",
		Builder: s.builder,
		Slots:   s.slots,
		Clock:   testclock.NewClock(time.Now()),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func (s *workerSuite) TestBuildsTheSetAndClosesItOnKill(c *gc.C) {
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	c.Check(s.builder.gotJSON, gc.Equals, `{"pool": {"type": "fake", "spec": {}}}`)
	c.Check(s.builder.gotDefault, gc.Equals, "pool")
	c.Check(s.builder.gotDeps.Slots, gc.Equals, s.slots)
	c.Check(w.Report()["default"], gc.Equals, "pool")
	workertest.CleanKill(c, w)
	c.Check(s.builder.env.closed, gc.Equals, true)
}

func (s *workerSuite) TestInvalidSetIsAnError(c *gc.C) {
	s.builder.err = errors.New(`provisioner "pool" (static): runtimes[0].slots: must be at least 1`)
	_, err := environs.NewWorker(s.config())
	c.Assert(err, gc.ErrorMatches, `build provisioner set: provisioner "pool" \(static\): runtimes\[0\].slots: must be at least 1`)
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, breakIt := range []func(*environs.Config){
		func(cfg *environs.Config) { cfg.SetJSON = nil },
		func(cfg *environs.Config) { cfg.Builder = nil },
		func(cfg *environs.Config) { cfg.Slots = nil },
		func(cfg *environs.Config) { cfg.Clock = nil },
		func(cfg *environs.Config) { cfg.Logger = nil },
	} {
		cfg := s.config()
		breakIt(&cfg)
		c.Check(cfg.Validate(), gc.NotNil)
	}
}

func (s *workerSuite) manifold() dependency.Manifold {
	return environs.Manifold(environs.ManifoldConfig{
		ClockName:    "clock",
		DatabaseName: "database",
		SetJSON:      []byte(`{}`),
		Default:      "pool",
		Builder:      s.builder,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewWorker:    environs.NewManifoldWorker,
	})
}

func (s *workerSuite) TestManifoldInputs(c *gc.C) {
	c.Check(s.manifold().Inputs, gc.DeepEquals, []string{"clock", "database"})
}

func (s *workerSuite) TestManifoldMissingInputs(c *gc.C) {
	clk := testclock.NewClock(time.Now())
	for _, inputs := range []map[string]any{
		{"clock": dependency.ErrMissing, "database": domain.State(fakeState{})},
		{"clock": clk, "database": dependency.ErrMissing},
	} {
		_, err := s.manifold().Start(context.Background(), dt.StubGetter(inputs))
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)
	}
}

func (s *workerSuite) TestManifoldOutputsTheSet(c *gc.C) {
	m := s.manifold()
	w, err := m.Start(context.Background(), dt.StubGetter(map[string]any{
		"clock":    testclock.NewClock(time.Now()),
		"database": domain.State(fakeState{}),
	}))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	var set *environ.Set
	c.Assert(m.Output(w, &set), gc.IsNil)
	c.Check(set.Default, gc.Equals, "pool")
	c.Check(set.Environs["pool"], gc.Equals, environ.Environ(s.builder.env))
	var wrong *int
	c.Check(m.Output(w, &wrong), gc.NotNil)
}

type fakeBuilder struct {
	env        *fakeEnviron
	err        error
	gotJSON    string
	gotDefault string
	gotDeps    environ.Deps
}

func (b *fakeBuilder) NewSet(setJSON []byte, defaultName string, deps environ.Deps) (*environ.Set, error) {
	b.gotJSON, b.gotDefault, b.gotDeps = string(setJSON), defaultName, deps
	if b.err != nil {
		return nil, b.err
	}
	return &environ.Set{Default: defaultName, Environs: map[string]environ.Environ{"pool": b.env}}, nil
}

// fakeEnviron only records Close; the worker calls nothing else.
type fakeEnviron struct {
	environ.Environ
	closed bool
}

func (e *fakeEnviron) Type() string { return "fake" }
func (e *fakeEnviron) Close() error { e.closed = true; return nil }

type fakeSlots struct{ domain.SlotStore }

type fakeState struct{ domain.State }
