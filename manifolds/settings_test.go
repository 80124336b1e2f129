package manifolds_test

import (
	"errors"
	"time"

	jujuerrors "github.com/juju/errors"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/manifolds"
	"github.com/berth-dev/berth/worker/database"
	"github.com/berth-dev/berth/worker/provisionerset"
)

type settingsSuite struct{}

var _ = gc.Suite(&settingsSuite{})

// Every worker's default settings are valid as they are, once the agent's own (its id, the
// run's inputs) are added.
func (*settingsSuite) TestDefaultsAreValid(c *gc.C) {
	cfg := manifolds.DefaultConfig()
	cfg.Membership.Agent.ID = "agent-a"
	c.Check(cfg.ValidateSettings(), gc.IsNil)

	db := database.DefaultSettings()
	db.URL = "postgres://db/berth"
	c.Check(db.Validate(), gc.IsNil)
	set := provisionerset.DefaultSettings()
	set.Initial, set.Origin = []byte(`{}`), "file provisioners.json"
	c.Check(set.Validate(), gc.IsNil)
}

// A setting that is not valid is NotValid and named by its path in Config, whichever worker
// checks it; a setting several workers take is named as its owner.
func (*settingsSuite) TestAnInvalidSettingIsNamed(c *gc.C) {
	for _, t := range []struct {
		name    string
		breakIt func(*manifolds.Config)
	}{
		{"Membership.Agent.ID", func(cfg *manifolds.Config) { cfg.Membership.Agent.ID = "" }},
		{"Membership.HeartbeatInterval", func(cfg *manifolds.Config) { cfg.Membership.HeartbeatInterval = 0 }},
		{"Membership.TTL", func(cfg *manifolds.Config) { cfg.Membership.TTL = time.Second }},
		{"Membership.TTL", func(cfg *manifolds.Config) { cfg.Membership.TTL = cfg.Membership.PruneAfter }},
		{"Membership.Timeout", func(cfg *manifolds.Config) { cfg.Membership.Timeout = 0 }},
		{"Membership.ResignTimeout", func(cfg *manifolds.Config) { cfg.Membership.ResignTimeout = 0 }},
		{"Membership.PruneInterval", func(cfg *manifolds.Config) { cfg.Membership.PruneInterval = 0 }},
		{"HTTPServer.Addr", func(cfg *manifolds.Config) { cfg.HTTPServer.Addr = "" }},
		{"HTTPServer.Addr", func(cfg *manifolds.Config) { cfg.HTTPServer.Addr = "9090" }},
		{"HTTPServer.ShutdownTimeout", func(cfg *manifolds.Config) { cfg.HTTPServer.ShutdownTimeout = 0 }},
		{"Provisioner.Concurrency", func(cfg *manifolds.Config) { cfg.Provisioner.Concurrency = 0 }},
		{"Provisioner.AwaitConcurrency", func(cfg *manifolds.Config) { cfg.Provisioner.AwaitConcurrency = 0 }},
		{"Provisioner.ReconcileTimeout", func(cfg *manifolds.Config) { cfg.Provisioner.ReconcileTimeout = 0 }},
		{"Provisioner.LeaseTTL", func(cfg *manifolds.Config) { cfg.Provisioner.LeaseTTL = cfg.Provisioner.ReconcileTimeout }},
		{"Provisioner.BackoffBase", func(cfg *manifolds.Config) { cfg.Provisioner.BackoffBase = 0 }},
		{"Provisioner.BackoffMax", func(cfg *manifolds.Config) { cfg.Provisioner.BackoffMax = time.Millisecond }},
		{"Provisioner.CapacityRetry", func(cfg *manifolds.Config) { cfg.Provisioner.CapacityRetry = 0 }},
		{"Watcher.PollInterval", func(cfg *manifolds.Config) { cfg.Watcher.PollInterval = 0 }},
		{"Watcher.GapTimeout", func(cfg *manifolds.Config) { cfg.Watcher.GapTimeout = 0 }},
		{"Watcher.BatchSize", func(cfg *manifolds.Config) { cfg.Watcher.BatchSize = 0 }},
		{"Health.Interval", func(cfg *manifolds.Config) { cfg.Health.Interval = 0 }},
		{"Health.Concurrency", func(cfg *manifolds.Config) { cfg.Health.Concurrency = 0 }},
		{"Health.PageSize", func(cfg *manifolds.Config) { cfg.Health.PageSize = 0 }},
		{"Health.CheckTimeout", func(cfg *manifolds.Config) { cfg.Health.CheckTimeout = 0 }},
		{"EnvironCheck.CheckTimeout", func(cfg *manifolds.Config) { cfg.EnvironCheck.CheckTimeout = 0 }},
		{"Capacity.Interval", func(cfg *manifolds.Config) { cfg.Capacity.Interval = 0 }},
		{"Capacity.Timeout", func(cfg *manifolds.Config) { cfg.Capacity.Timeout = 0 }},
		{"Capacity.Thresholds.Total", func(cfg *manifolds.Config) { cfg.Capacity.Thresholds.Total = 80 }},
		{"Capacity.Thresholds.Host", func(cfg *manifolds.Config) { cfg.Capacity.Thresholds.Host = 0 }},
		{"ChangeLog.Interval", func(cfg *manifolds.Config) { cfg.ChangeLog.Interval = 0 }},
		{"ChangeLog.Retain", func(cfg *manifolds.Config) { cfg.ChangeLog.Retain = -time.Hour }},
		{"ChangeLog.HistoryRetain", func(cfg *manifolds.Config) { cfg.ChangeLog.HistoryRetain = 0 }},
		{"Leadership.Timeout", func(cfg *manifolds.Config) { cfg.Leadership.Timeout = 0 }},
		{"SchemaGuard.Timeout", func(cfg *manifolds.Config) { cfg.SchemaGuard.Timeout = 0 }},
	} {
		cfg := config()
		t.breakIt(&cfg)
		for _, err := range []error{cfg.ValidateSettings(), cfg.Validate()} {
			c.Check(jujuerrors.Is(err, jujuerrors.NotValid), gc.Equals, true, gc.Commentf("%s: err = %v, want NotValid", t.name, err))
			var invalid *manifolds.SettingError
			if c.Check(errors.As(err, &invalid), gc.Equals, true, gc.Commentf("%s: err = %v, want a SettingError", t.name, err)) {
				c.Check(invalid.Name, gc.Equals, t.name)
				c.Check(err, gc.ErrorMatches, t.name+` .* not valid`)
			}
		}
		engineCfg := cfg
		engineCfg.Engine, engineCfg.Metrics = nil, nil
		_, err := manifolds.NewEngine(engineCfg)
		c.Check(err, gc.ErrorMatches, t.name+` .* not valid`, gc.Commentf("NewEngine"))
	}
}
