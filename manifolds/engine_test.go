package manifolds_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"

	"github.com/juju/clock/testclock"
	jujuerrors "github.com/juju/errors"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/internal/pgtest"
	"github.com/berth-dev/berth/manifolds"
	"github.com/berth-dev/berth/metrics"
	"github.com/berth-dev/berth/worker/database"
	"github.com/berth-dev/berth/worker/httpserver"
)

type engineSuite struct{}

var _ = gc.Suite(&engineSuite{})

func (*engineSuite) TestEngineConfig(c *gc.C) {
	cfg := manifolds.EngineConfig(testclock.NewClock(time.Now()), slog.New(slog.NewTextHandler(io.Discard, nil)), metrics.New())
	c.Assert(cfg.Validate(), gc.IsNil)
	// A taken --http-addr ends the agent; any other failure restarts the worker.
	c.Check(cfg.IsFatal(fmt.Errorf("http-server: %w", httpserver.ErrCannotListen)), gc.Equals, true)
	c.Check(cfg.IsFatal(errors.New("database unreachable")), gc.Equals, false)
	first, second := errors.New("first"), errors.New("second")
	c.Check(cfg.WorstError(first, second), gc.Equals, first)
}

// engineConfig is config() as NewEngine takes it, with a store that cannot be reached, so
// that the workers below the database wait for it.
func engineConfig() manifolds.Config {
	cfg := config()
	cfg.Engine, cfg.Metrics = nil, nil
	cfg.OpenDatabase = func(context.Context, string) (database.DB, error) {
		return nil, errors.New("database unreachable")
	}
	return cfg
}

func (*engineSuite) TestNewEngineRunsEveryManifold(c *gc.C) {
	engine, err := manifolds.NewEngine(engineConfig())
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, engine)
	report, ok := engine.Report()["manifolds"].(map[string]any)
	c.Assert(ok, gc.Equals, true)
	var names []string
	for name := range report {
		names = append(names, name)
	}
	sort.Strings(names)
	var want []string
	for name := range manifolds.Manifolds(config()) {
		want = append(want, name)
	}
	sort.Strings(want)
	c.Check(names, gc.DeepEquals, want)
}

func (*engineSuite) TestNewEngineMakesTheEngineAndMetrics(c *gc.C) {
	for _, breakIt := range []func(*manifolds.Config){
		func(cfg *manifolds.Config) { cfg.Engine = config().Engine },
		func(cfg *manifolds.Config) { cfg.Metrics = metrics.New() },
	} {
		cfg := engineConfig()
		breakIt(&cfg)
		_, err := manifolds.NewEngine(cfg)
		c.Check(jujuerrors.Is(err, jujuerrors.NotValid), gc.Equals, true, gc.Commentf("err = %v, want NotValid", err))
		c.Check(err, gc.ErrorMatches, "manifolds: Engine or Metrics set .*leave them unset.*")
	}
}

func (*engineSuite) TestNewEngineRefusesAnIncompleteConfig(c *gc.C) {
	for field, breakIt := range map[string]func(*manifolds.Config){
		"Clock":        func(cfg *manifolds.Config) { cfg.Clock = nil },
		"Logger":       func(cfg *manifolds.Config) { cfg.Logger = nil },
		"OpenDatabase": func(cfg *manifolds.Config) { cfg.OpenDatabase = nil },
	} {
		cfg := engineConfig()
		breakIt(&cfg)
		_, err := manifolds.NewEngine(cfg)
		c.Check(jujuerrors.Is(err, jujuerrors.NotValid), gc.Equals, true, gc.Commentf("err = %v, want NotValid", err))
		c.Check(err, gc.ErrorMatches, "manifolds: .*"+field+".*")
	}
}

// The agent's store ends a session whose transaction has been idle for half the agent TTL,
// and never sooner than a second: an agent stopped mid-transaction then holds its rows'
// locks no longer than its liveness lasts.
func (*engineSuite) TestStoreOpenerEndsTransactionsIdleForHalfTheAgentTTL(c *gc.C) {
	c.Check(manifolds.IdleInTransaction(15*time.Second), gc.Equals, 7500*time.Millisecond)
	c.Check(manifolds.IdleInTransaction(time.Second), gc.Equals, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL, drop, err := pgtest.CreateDatabase(ctx)
	c.Assert(err, gc.IsNil)
	defer drop()
	for ttl, want := range map[time.Duration]string{15 * time.Second: "7500ms", 4 * time.Second: "2s", time.Second: "1s"} {
		db, err := manifolds.StoreOpener(slog.New(slog.NewTextHandler(io.Discard, nil)), ttl)(ctx, dbURL)
		c.Assert(err, gc.IsNil)
		st, ok := db.(*postgres.State)
		c.Assert(ok, gc.Equals, true, gc.Commentf("%T", db))
		var got string
		err = st.Pool().QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&got)
		st.Close()
		c.Assert(err, gc.IsNil)
		c.Check(got, gc.Equals, want, gc.Commentf("agent TTL %s", ttl))
	}
}
