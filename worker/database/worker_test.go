package database_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	dt "github.com/juju/worker/v4/dependency/testing"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/database"
)

type workerSuite struct {
	clock *testclock.Clock
	db    *fakeDB
}

var _ = gc.Suite(&workerSuite{})

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Now())
	s.db = &fakeDB{pinged: make(chan struct{}, 10)}
}

func (s *workerSuite) config() database.Config {
	return database.Config{
		Open:   func(context.Context, string) (database.DB, error) { return s.db, nil },
		Clock:  s.clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Settings: database.Settings{
			URL:             "postgres://berth:secret@db/berth",
			ConnectTimeout:  time.Second,
			PingInterval:    time.Second,
			PingTimeout:     time.Second,
			MaxPingFailures: 2,
		},
	}
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		breakIt func(*database.Config)
		field   string
	}{
		{func(cfg *database.Config) { cfg.URL = "" }, "URL .*BERTH_DATABASE_URL"},
		{func(cfg *database.Config) { cfg.Open = nil }, "Open"},
		{func(cfg *database.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *database.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *database.Config) { cfg.PingInterval = 0 }, "PingInterval 0s"},
		{func(cfg *database.Config) { cfg.MaxPingFailures = 0 }, "MaxPingFailures 0"},
	} {
		cfg := s.config()
		t.breakIt(&cfg)
		_, err := database.NewWorker(cfg)
		testkit.CheckNotValid(c, err, t.field)
		c.Check(err, gc.Not(gc.ErrorMatches), ".*secret.*")
	}
}

// start starts a worker on s.config() and waits until it has connected.
func (s *workerSuite) start(c *gc.C) *database.Worker {
	w, err := database.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	waitConnected(c, w)
	return w
}

func waitConnected(c *gc.C, w *database.Worker) {
	select {
	case <-database.Connected(w):
	case <-time.After(testkit.LongWait):
		c.Fatal("the worker never connected")
	}
}

func (s *workerSuite) TestMigratesAtStartAndClosesOnKill(c *gc.C) {
	w := s.start(c)
	c.Check(s.db.migrated(), gc.Equals, 1)
	workertest.CleanKill(c, w)
	c.Check(s.db.closed(), gc.Equals, true)
}

func (s *workerSuite) TestOpenFailureIsAnError(c *gc.C) {
	cfg := s.config()
	cfg.Open = func(context.Context, string) (database.DB, error) { return nil, errors.New("connection refused") }
	w, err := database.NewWorker(cfg)
	c.Assert(err, gc.IsNil)
	err = workertest.CheckKilled(c, w)
	c.Assert(err, gc.ErrorMatches, "open database: connection refused")
}

func (s *workerSuite) TestMigrateFailureClosesTheConnection(c *gc.C) {
	s.db.migrateErr = errors.New("permission denied")
	w, err := database.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	err = workertest.CheckKilled(c, w)
	c.Assert(err, gc.ErrorMatches, "migrate database: permission denied")
	c.Check(s.db.closed(), gc.Equals, true)
}

// blockingOpen is an Opener for a server that never answers: it says on opening that it was
// called and returns its context's error once the context ends.
func blockingOpen(opening chan<- struct{}) database.Opener {
	return func(ctx context.Context, _ string) (database.DB, error) {
		opening <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

func (s *workerSuite) TestKillWhileConnectingStopsAtOnce(c *gc.C) {
	opening := make(chan struct{}, 1)
	cfg := s.config()
	cfg.ConnectTimeout = time.Hour
	cfg.Open = blockingOpen(opening)
	w, err := database.NewWorker(cfg)
	c.Assert(err, gc.IsNil)
	waitFor(c, opening, "the worker never opened the database")
	// Only the Kill can end the connect: the test clock never reaches the hour.
	workertest.CleanKill(c, w)
}

func (s *workerSuite) TestConnectTimeoutIsOnTheWorkersClock(c *gc.C) {
	opening := make(chan struct{}, 1)
	cfg := s.config()
	cfg.ConnectTimeout = 30 * time.Second
	cfg.Open = blockingOpen(opening)
	w, err := database.NewWorker(cfg)
	c.Assert(err, gc.IsNil)
	defer workertest.DirtyKill(c, w)
	waitFor(c, opening, "the worker never opened the database")
	workertest.CheckAlive(c, w)

	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	err = workertest.CheckKilled(c, w)
	c.Assert(err, gc.ErrorMatches, "open database: timed out after 30s: context canceled")
}

func (s *workerSuite) TestMigrateTimeoutIsOnTheWorkersClock(c *gc.C) {
	migrating := make(chan struct{}, 1)
	s.db.migrate = func(ctx context.Context) error {
		migrating <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	w, err := database.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	defer workertest.DirtyKill(c, w)
	waitFor(c, migrating, "the worker never migrated the database")

	c.Assert(s.clock.WaitAdvance(time.Second, testkit.LongWait, 1), gc.IsNil)
	err = workertest.CheckKilled(c, w)
	c.Assert(err, gc.ErrorMatches, "migrate database: timed out after 1s: context canceled")
	c.Check(s.db.closed(), gc.Equals, true)
}

func (s *workerSuite) TestOutputIsMissingUntilConnected(c *gc.C) {
	opening := make(chan struct{}, 1)
	cfg := s.config()
	cfg.Open = blockingOpen(opening)
	w, err := database.NewWorker(cfg)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	waitFor(c, opening, "the worker never opened the database")

	manifold := database.Manifold(s.manifoldConfig())
	var state domain.State
	c.Check(errors.Is(manifold.Output(w, &state), dependency.ErrMissing), gc.Equals, true)
	var hold database.Hold
	c.Check(errors.Is(manifold.Output(w, &hold), dependency.ErrMissing), gc.Equals, true)
}

// The engine hands Start a context it cancels when it stops; a Start still waiting for the
// connection ends with it and leaves no worker behind.
func (s *workerSuite) TestManifoldStartEndsWithItsContext(c *gc.C) {
	opening := make(chan struct{}, 1)
	cfg := s.manifoldConfig()
	cfg.ConnectTimeout = time.Hour
	cfg.Open = blockingOpen(opening)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() {
		_, err := database.Manifold(cfg).Start(ctx, dt.StubGetter(map[string]any{"clock": s.clock}))
		started <- err
	}()
	waitFor(c, opening, "the worker never opened the database")
	cancel()
	select {
	case err := <-started:
		c.Check(err, gc.Equals, context.Canceled)
	case <-time.After(testkit.LongWait):
		c.Fatal("Start did not end with its context")
	}
}

func (s *workerSuite) TestManifoldStartFailsWithTheConnectError(c *gc.C) {
	cfg := s.manifoldConfig()
	cfg.Open = func(context.Context, string) (database.DB, error) { return nil, errors.New("connection refused") }
	_, err := database.Manifold(cfg).Start(context.Background(), dt.StubGetter(map[string]any{"clock": s.clock}))
	c.Check(err, gc.ErrorMatches, "open database: connection refused")
}

func waitFor(c *gc.C, ch <-chan struct{}, failure string) {
	select {
	case <-ch:
	case <-time.After(testkit.LongWait):
		c.Fatal(failure)
	}
}

func (s *workerSuite) manifoldConfig() database.ManifoldConfig {
	return database.ManifoldConfig{
		ClockName: "clock",
		Open:      func(context.Context, string) (database.DB, error) { return s.db, nil },
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewWorker: database.NewManifoldWorker,
		Settings: database.Settings{
			URL:            "postgres://db/berth",
			ConnectTimeout: time.Second, PingInterval: time.Second, PingTimeout: time.Second, MaxPingFailures: 1,
		},
	}
}

func (s *workerSuite) TestDiesAfterConsecutivePingFailures(c *gc.C) {
	w := s.start(c)
	defer workertest.DirtyKill(c, w)

	s.db.setPingErr(errors.New("server closed the connection"))
	c.Assert(s.clock.WaitAdvance(time.Second, time.Second, 1), gc.IsNil)
	s.db.waitPing(c)
	workertest.CheckAlive(c, w)

	// One success resets the count.
	s.db.setPingErr(nil)
	c.Assert(s.clock.WaitAdvance(time.Second, time.Second, 1), gc.IsNil)
	s.db.waitPing(c)
	s.db.setPingErr(errors.New("server closed the connection"))
	c.Assert(s.clock.WaitAdvance(time.Second, time.Second, 1), gc.IsNil)
	s.db.waitPing(c)
	workertest.CheckAlive(c, w)

	c.Assert(s.clock.WaitAdvance(time.Second, time.Second, 1), gc.IsNil)
	err := workertest.CheckKilled(c, w)
	c.Assert(err, gc.ErrorMatches, "database unreachable after 2 checks: server closed the connection")
	c.Check(s.db.closed(), gc.Equals, true)
}

func (s *workerSuite) TestManifoldOutputsTheState(c *gc.C) {
	cfg := s.manifoldConfig()
	manifold := database.Manifold(cfg)
	c.Check(manifold.Inputs, gc.DeepEquals, []string{"clock"})

	_, err := manifold.Start(context.Background(), dt.StubGetter(map[string]any{"clock": dt.StubResource{}}))
	c.Check(err, gc.NotNil)
	_, err = manifold.Start(context.Background(), dt.StubGetter(map[string]any{}))
	c.Check(err, gc.NotNil)

	w, err := manifold.Start(context.Background(), dt.StubGetter(map[string]any{"clock": s.clock}))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	var state domain.State
	c.Assert(manifold.Output(w, &state), gc.IsNil)
	c.Check(state, gc.Equals, domain.State(s.db))
	var wrong *int
	c.Check(manifold.Output(w, &wrong), gc.NotNil)
}

func (s *workerSuite) TestManifoldValidate(c *gc.C) {
	cfg := database.ManifoldConfig{ClockName: "clock", Open: func(context.Context, string) (database.DB, error) { return nil, nil },
		Logger: slog.Default(), NewWorker: func(database.Config) (worker.Worker, error) { return nil, nil },
		Settings: database.Settings{URL: "u", ConnectTimeout: time.Second, PingInterval: time.Second, PingTimeout: time.Second, MaxPingFailures: 1}}
	c.Check(cfg.Validate(), gc.IsNil)
	noURL := cfg
	noURL.URL = ""
	testkit.CheckNotValid(c, noURL.Validate(), "URL .*BERTH_DATABASE_URL")
	noClock := cfg
	noClock.ClockName = ""
	testkit.CheckNotValid(c, noClock.Validate(), "ClockName")
	noTimeout := cfg
	noTimeout.ConnectTimeout = 0
	testkit.CheckNotValid(c, noTimeout.Validate(), "ConnectTimeout 0s")
}

// fakeDB is a domain.State whose health the test controls; only the methods the worker calls
// do anything.
type fakeDB struct {
	domain.State
	mu         sync.Mutex
	migrations int
	migrateErr error
	migrate    func(context.Context) error // when set, Migrate runs it, without the lock
	pingErr    error
	isClosed   bool
	pinged     chan struct{}
}

func (f *fakeDB) Migrate(ctx context.Context) error {
	f.mu.Lock()
	f.migrations++
	migrate, err := f.migrate, f.migrateErr
	f.mu.Unlock()
	if migrate != nil {
		return migrate(ctx)
	}
	return err
}

func (f *fakeDB) Ping(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pinged <- struct{}{}
	return f.pingErr
}

func (f *fakeDB) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.isClosed = true
}

func (f *fakeDB) setPingErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pingErr = err
}

func (f *fakeDB) migrated() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.migrations
}

func (f *fakeDB) closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.isClosed
}

func (f *fakeDB) waitPing(c *gc.C) {
	select {
	case <-f.pinged:
	case <-time.After(testkit.LongWait):
		c.Fatal("the worker never pinged the database")
	}
}

func (s *workerSuite) TestReportCountsConsecutivePingFailures(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	failures := func(want int64) {
		// Report runs on the engine's goroutine while the loop records the ping.
		testkit.Eventually(c, func() error {
			if report := w.Report(); report["consecutive-ping-failures"] != want {
				return fmt.Errorf("report %v, want %d consecutive ping failures", report, want)
			}
			return nil
		})
	}

	s.db.setPingErr(errors.New("server closed the connection"))
	c.Assert(s.clock.WaitAdvance(time.Second, time.Second, 1), gc.IsNil)
	s.db.waitPing(c)
	failures(1)

	s.db.setPingErr(nil)
	c.Assert(s.clock.WaitAdvance(time.Second, time.Second, 1), gc.IsNil)
	s.db.waitPing(c)
	failures(0)
}

// A Hold keeps the store open after the worker stops, until it is released: the engine
// stops every worker at once, and a worker writing as it stops must not find it closed.
func (s *workerSuite) TestHoldKeepsTheStoreOpenUntilReleased(c *gc.C) {
	manifold := database.Manifold(s.manifoldConfig())
	w, err := manifold.Start(context.Background(), dt.StubGetter(map[string]any{"clock": s.clock}))
	c.Assert(err, gc.IsNil)
	var first, second database.Hold
	c.Assert(manifold.Output(w, &first), gc.IsNil)
	c.Assert(manifold.Output(w, &second), gc.IsNil)
	c.Check(first.State, gc.Equals, domain.State(s.db))

	workertest.CleanKill(c, w)
	c.Check(s.db.closed(), gc.Equals, false)
	first.Release()
	first.Release() // a second release of the same hold gives up nothing more
	c.Check(s.db.closed(), gc.Equals, false)
	second.Release()
	c.Check(s.db.closed(), gc.Equals, true)

	var late database.Hold
	c.Check(manifold.Output(w, &late), gc.ErrorMatches, "database: the store is closed")
}
