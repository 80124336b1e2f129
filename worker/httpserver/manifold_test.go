package httpserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	dt "github.com/juju/worker/v4/dependency/testing"
	"github.com/juju/worker/v4/workertest"
	"github.com/prometheus/client_golang/prometheus"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/httpserver"
)

type manifoldSuite struct {
	clock    *testclock.Clock
	reporter *fakeReporter
	registry *prometheus.Registry
	logger   *slog.Logger
}

var _ = gc.Suite(&manifoldSuite{})

func (s *manifoldSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(epoch)
	s.reporter = newFakeReporter(map[string]string{"database": "started"})
	s.registry = prometheus.NewRegistry()
	s.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (s *manifoldSuite) config() httpserver.ManifoldConfig {
	return httpserver.ManifoldConfig{
		ClockName:  "clock",
		EngineName: "engine",
		Gatherer:   s.registry,
		Settings: httpserver.Settings{
			Addr:            "127.0.0.1:0",
			Required:        []string{"database", "environs"},
			ShutdownTimeout: shutdownTimeout,
			Profiling:       true,
		},
		Logger: s.logger,
		NewWorker: func(httpserver.Config) (worker.Worker, error) {
			return nil, errors.New("NewWorker not expected")
		},
	}
}

func (s *manifoldSuite) getter(overrides map[string]any) dependency.Getter {
	resources := map[string]any{"clock": s.clock, "engine": s.reporter}
	for k, v := range overrides {
		resources[k] = v
	}
	return dt.StubGetter(resources)
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(httpserver.Manifold(s.config()).Inputs, gc.DeepEquals, []string{"clock", "engine"})
}

func (s *manifoldSuite) TestValidate(c *gc.C) {
	for i, t := range []struct {
		change func(*httpserver.ManifoldConfig)
		field  string
	}{
		{func(m *httpserver.ManifoldConfig) { m.ClockName = "" }, "ClockName"},
		{func(m *httpserver.ManifoldConfig) { m.EngineName = "" }, "EngineName"},
		{func(m *httpserver.ManifoldConfig) { m.Addr = "" }, "Addr .*--http-addr"},
		{func(m *httpserver.ManifoldConfig) { m.Gatherer = nil }, "Gatherer"},
		{func(m *httpserver.ManifoldConfig) { m.Required = nil }, "Required .*/readyz"},
		{func(m *httpserver.ManifoldConfig) { m.ShutdownTimeout = 0 }, "ShutdownTimeout 0s"},
		{func(m *httpserver.ManifoldConfig) { m.Logger = nil }, "Logger"},
		{func(m *httpserver.ManifoldConfig) { m.NewWorker = nil }, "NewWorker"},
	} {
		c.Logf("test %d: %s", i, t.field)
		cfg := s.config()
		t.change(&cfg)
		testkit.CheckNotValid(c, cfg.Validate(), t.field)
		w, err := httpserver.Manifold(cfg).Start(context.Background(), s.getter(nil))
		c.Check(w, gc.IsNil)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.config().Validate(), gc.IsNil)
}

func (s *manifoldSuite) TestMissingInputs(c *gc.C) {
	for _, name := range []string{"clock", "engine"} {
		c.Logf("missing %s", name)
		w, err := httpserver.Manifold(s.config()).Start(context.Background(), s.getter(map[string]any{name: dependency.ErrMissing}))
		c.Check(w, gc.IsNil)
		c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)
	}
}

func (s *manifoldSuite) TestStart(c *gc.C) {
	cfg := s.config()
	var got httpserver.Config
	cfg.NewWorker = func(config httpserver.Config) (worker.Worker, error) {
		got = config
		return workertest.NewErrorWorker(nil), nil
	}
	w, err := httpserver.Manifold(cfg).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)

	c.Check(got.Addr, gc.Equals, "127.0.0.1:0")
	c.Check(got.Reporter, gc.Equals, httpserver.Reporter(s.reporter))
	c.Check(got.Gatherer, gc.Equals, prometheus.Gatherer(s.registry))
	c.Check(got.Required, gc.DeepEquals, []string{"database", "environs"})
	c.Check(got.Logger, gc.Equals, s.logger)
	c.Check(got.Clock, gc.Equals, s.clock)
	c.Check(got.ShutdownTimeout, gc.Equals, shutdownTimeout)
	c.Check(got.Profiling, gc.Equals, true)
	c.Check(got.Validate(), gc.IsNil)
}

func (s *manifoldSuite) TestStartsWorker(c *gc.C) {
	cfg := s.config()
	cfg.NewWorker = httpserver.NewManifoldWorker
	w, err := httpserver.Manifold(cfg).Start(context.Background(), s.getter(nil))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	server, ok := w.(*httpserver.Worker)
	c.Assert(ok, gc.Equals, true)
	code, _ := getURL(c, "http://"+server.Addr()+"/readyz")
	c.Check(code, gc.Equals, 503) // environs is not in the report
}
