package manifolds_test

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/juju/clock"
	"github.com/juju/clock/testclock"
	jujuerrors "github.com/juju/errors"
	"github.com/juju/worker/v4/dependency"
	dt "github.com/juju/worker/v4/dependency/testing"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
	"github.com/berth-dev/berth/manifolds"
	"github.com/berth-dev/berth/metrics"
	"github.com/berth-dev/berth/worker/database"
	"github.com/berth-dev/berth/worker/environs"
)

func TestPackage(t *testing.T) { gc.TestingT(t) }

type manifoldsSuite struct{}

var _ = gc.Suite(&manifoldsSuite{})

func config() manifolds.Config {
	cfg := manifolds.DefaultConfig()
	cfg.Clock = testclock.NewClock(time.Now())
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Rand = func() float64 { return 0.5 }
	cfg.DatabaseURL = "postgres://db/berth"
	cfg.OpenDatabase = func(context.Context, string) (database.DB, error) { return nil, nil }
	cfg.ProvisionerSetJSON = []byte(`{}`)
	cfg.SetBuilder = environ.NewRegistry()
	cfg.Engine = &dependency.Engine{} // never started: only its report manifold is built
	cfg.Metrics = metrics.New()
	cfg.HTTPServer.Addr = "127.0.0.1:0"
	cfg.Membership.Agent.ID = "agent-a"
	return cfg
}

func (*manifoldsSuite) TestNames(c *gc.C) {
	var names []string
	for name := range manifolds.Manifolds(config()) {
		names = append(names, name)
	}
	sort.Strings(names)
	c.Check(names, gc.DeepEquals, []string{"capacity", "changelog-pruner", "clock", "database", "engine", "environ-check", "environs", "healthcheck", "http-server", "leadership", "membership", "provisioner", "provisioner-names", "provisioner-set", "resource-metrics", "schema-guard"})
}

func (*manifoldsSuite) TestInputs(c *gc.C) {
	got := map[string][]string{}
	for name, m := range manifolds.Manifolds(config()) {
		inputs := append([]string(nil), m.Inputs...)
		sort.Strings(inputs)
		got[name] = inputs
	}
	c.Check(got, gc.DeepEquals, map[string][]string{
		"clock":             nil,
		"database":          {"clock"},
		"provisioner-set":   {"clock"},
		"environs":          {"clock", "database", "provisioner-set"},
		"provisioner":       {"clock", "database", "environs", "schema-guard"},
		"changelog-pruner":  {"clock", "database", "leadership"},
		"membership":        {"clock", "database"},
		"provisioner-names": {"environs"},
		"leadership":        {"clock", "database", "membership", "schema-guard"},
		"engine":            nil,
		"http-server":       {"clock", "engine"},
		"resource-metrics":  {"database"},
		"schema-guard":      {"clock", "database"},
		"healthcheck":       {"clock", "database", "environs", "schema-guard"},
		"environ-check":     {"clock", "environs", "leadership"},
		"capacity":          {"clock", "database", "environs", "leadership"},
	})
}

func (*manifoldsSuite) TestAcyclic(c *gc.C) {
	c.Check(dependency.Validate(manifolds.Manifolds(config())), gc.IsNil)
}

func (*manifoldsSuite) TestValidate(c *gc.C) {
	c.Check(config().Validate(), gc.IsNil)
	for _, t := range []struct {
		breakIt func(*manifolds.Config)
		field   string
	}{
		{func(cfg *manifolds.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *manifolds.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *manifolds.Config) { cfg.Rand = nil }, "Rand"},
		{func(cfg *manifolds.Config) { cfg.OpenDatabase = nil }, "OpenDatabase"},
		{func(cfg *manifolds.Config) { cfg.SetBuilder = nil }, "SetBuilder"},
		{func(cfg *manifolds.Config) { cfg.Engine = nil }, "Engine"},
		{func(cfg *manifolds.Config) { cfg.Metrics = nil }, "Metrics"},
	} {
		cfg := config()
		t.breakIt(&cfg)
		err := cfg.Validate()
		c.Check(jujuerrors.Is(err, jujuerrors.NotValid), gc.Equals, true, gc.Commentf("err = %v, want NotValid", err))
		c.Check(err, gc.ErrorMatches, "manifolds: .*"+t.field+".*")
	}
}

func (*manifoldsSuite) TestClockOutputsTheConfiguredClock(c *gc.C) {
	cfg := config()
	m := manifolds.Manifolds(cfg)[manifolds.ClockName]
	w, err := m.Start(context.Background(), dt.StubGetter(nil))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	var clk clock.Clock
	c.Assert(m.Output(w, &clk), gc.IsNil)
	c.Check(clk, gc.Equals, cfg.Clock)
	var wrong *int
	c.Check(m.Output(w, &wrong), gc.ErrorMatches, `value manifold: cannot output \*testclock.Clock into \*int`)
	c.Check(m.Output(w, 42), gc.ErrorMatches, `value manifold: out must be a non-nil pointer, got int`)
}

// countingState counts resources, as the database's State does; nothing else is called.
type countingState struct{ domain.State }

func (countingState) CountResourcesByStatus(context.Context) (map[domain.Status]int, error) {
	return map[domain.Status]int{domain.StatusReady: 3}, nil
}

func (*manifoldsSuite) TestResourceMetricsCountWhileTheWorkerRuns(c *gc.C) {
	cfg := config()
	m := manifolds.Manifolds(cfg)[manifolds.ResourceMetricsName]
	w, err := m.Start(context.Background(), dt.StubGetter(map[string]any{manifolds.DatabaseName: countingState{}}))
	c.Assert(err, gc.IsNil)
	c.Check(readyResources(c, cfg.Metrics), gc.DeepEquals, []float64{3})

	// The database worker stopped: berth_resources goes rather than go stale.
	workertest.CleanKill(c, w)
	c.Check(readyResources(c, cfg.Metrics), gc.HasLen, 0)
}

// readyResources is the value of berth_resources{status="ready"}, if it is exported.
func readyResources(c *gc.C, m *metrics.Metrics) []float64 {
	families, err := m.Gather()
	c.Assert(err, gc.IsNil)
	var values []float64
	for _, family := range families {
		if family.GetName() != "berth_resources" {
			continue
		}
		for _, metric := range family.GetMetric() {
			for _, label := range metric.GetLabel() {
				if label.GetName() == "status" && label.GetValue() == string(domain.StatusReady) {
					values = append(values, metric.GetGauge().GetValue())
				}
			}
		}
	}
	return values
}

// The environs manifold reads the provisioner-set manifold's output as its own SetSource.
func (*manifoldsSuite) TestProvisionerSetOutputsTheEnvironsSetSource(c *gc.C) {
	cfg := config()
	registry := environ.NewRegistry()
	registry.Register(static.Type, static.New)
	cfg.SetBuilder = registry
	cfg.ProvisionerSetJSON = []byte(`{"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://127.0.0.1:9091", "slots": 1}]}}}`)
	cfg.ProvisionerSetOrigin = "BERTH_PROVISIONER_SET_JSON"
	cfg.DefaultProvisioner = "pool"
	m := manifolds.Manifolds(cfg)[manifolds.ProvisionerSetName]
	w, err := m.Start(context.Background(), dt.StubGetter(map[string]any{manifolds.ClockName: cfg.Clock}))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	var source environs.SetSource
	c.Assert(m.Output(w, &source), gc.IsNil)
	setJSON, _ := source.Current()
	c.Check(string(setJSON), gc.Equals, string(cfg.ProvisionerSetJSON))
}
