package manifolds_test

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	jujuerrors "github.com/juju/errors"
	"github.com/juju/worker/v4/dependency"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/metrics"
	"github.com/berth-dev/berth/manifolds"
	"github.com/berth-dev/berth/worker/database"
)

func TestPackage(t *testing.T) { gc.TestingT(t) }

type manifoldsSuite struct{}

var _ = gc.Suite(&manifoldsSuite{})

func config() manifolds.Config {
	return manifolds.Config{
		Clock:              testclock.NewClock(time.Now()),
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		Rand:               func() float64 { return 0.5 },
		DatabaseURL:        "postgres://db/berth",
		OpenDatabase:       func(context.Context, string) (database.DB, error) { return nil, nil },
		ProvisionerSetJSON: []byte(`{}`),
		SetBuilder:         environ.NewRegistry(),
		Engine:             &dependency.Engine{}, // never started: only its report manifold is built
		Metrics:            metrics.New(),
		HTTPAddr:           "127.0.0.1:0",
	}
}

func (*manifoldsSuite) TestNames(c *gc.C) {
	var names []string
	for name := range manifolds.Manifolds(config()) {
		names = append(names, name)
	}
	sort.Strings(names)
	c.Check(names, gc.DeepEquals, []string{"capacity", "changelog-pruner", "clock", "database", "engine", "environ-check", "environs", "healthcheck", "http-server", "leadership", "membership", "provisioner", "provisioner-set", "resource-metrics"})
}

func (*manifoldsSuite) TestInputs(c *gc.C) {
	got := map[string][]string{}
	for name, m := range manifolds.Manifolds(config()) {
		inputs := append([]string(nil), m.Inputs...)
		sort.Strings(inputs)
		got[name] = inputs
	}
	c.Check(got, gc.DeepEquals, map[string][]string{
		"clock":            nil,
		"database":         {"clock"},
		"provisioner-set":  {"clock"},
		"environs":         {"clock", "database", "provisioner-set"},
		"provisioner":      {"clock", "database", "environs"},
		"changelog-pruner": {"clock", "database", "leadership"},
		"membership":       {"clock", "database"},
		"leadership":       {"clock", "database", "membership"},
		"engine":           nil,
		"http-server":      {"clock", "engine"},
		"resource-metrics": {"database"},
		"healthcheck":      {"clock", "database", "environs"},
		"environ-check":    {"clock", "environs", "leadership"},
		"capacity":         {"clock", "database", "environs", "leadership"},
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
