package schemaguard_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4/dependency"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/schemaguard"
)

// workerSuite runs the worker on a real SQLite store, whose schema a newer build's
// migration is made to land on with plain SQL.
type workerSuite struct {
	clock  *testclock.Clock
	store  store.DB
	sql    *sql.DB
	logs   *testkit.Buffer
	config schemaguard.Config
}

var _ = gc.Suite(&workerSuite{})

func (s *workerSuite) SetUpTest(c *gc.C) {
	path := filepath.Join(c.MkDir(), "berth.db")
	st, err := store.Open(context.Background(), "sqlite://"+path, store.Options{})
	c.Assert(err, gc.IsNil)
	c.Assert(st.Migrate(context.Background()), gc.IsNil)
	s.store = st
	s.sql, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	c.Assert(err, gc.IsNil)
	s.clock = testclock.NewClock(time.Now())
	s.logs = &testkit.Buffer{}
	s.config = schemaguard.Config{
		Store:    st,
		Clock:    s.clock,
		Logger:   slog.New(slog.NewTextHandler(s.logs, nil)),
		Settings: schemaguard.Settings{Interval: 2 * time.Second, Timeout: 5 * time.Second},
	}
}

func (s *workerSuite) TearDownTest(c *gc.C) {
	_ = s.sql.Close()
	s.store.Close()
}

// landNewerSchema records a migration one version above what the build knows, as a newer
// build's migrate would, and returns the database's version then.
func (s *workerSuite) landNewerSchema(c *gc.C) int {
	v, err := s.store.CheckSchema(context.Background())
	c.Assert(err, gc.IsNil)
	_, err = s.sql.Exec(`INSERT INTO schema_migrations (version) VALUES ($1)`, v.Known+1)
	c.Assert(err, gc.IsNil)
	return v.Known + 1
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*schemaguard.Config)
		field  string
	}{
		{func(cfg *schemaguard.Config) { cfg.Store = nil }, "Store"},
		{func(cfg *schemaguard.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *schemaguard.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *schemaguard.Config) { cfg.Interval = 0 }, "Interval 0s"},
		{func(cfg *schemaguard.Config) { cfg.Timeout = 0 }, "Timeout 0s"},
	} {
		config := s.config
		t.mutate(&config)
		w, err := schemaguard.NewWorker(config)
		c.Check(w, gc.IsNil)
		testkit.CheckNotValid(c, err, t.field)
	}
}

// On a schema the build knows the flag is true, and the report shows both versions.
func (s *workerSuite) TestFlagIsTrueOnAKnownSchema(c *gc.C) {
	w, err := schemaguard.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Check(w.Check(), gc.Equals, true)
	report := w.Report()
	c.Check(report["known"], gc.Not(gc.Equals), 0)
	c.Check(report["database"], gc.Equals, report["known"])
	c.Check(report["not-ready"], gc.IsNil)
	c.Check(s.logs.String(), gc.Equals, "")
}

// On a newer schema the flag is false; the worker runs on, reports itself not ready, and
// its log line and report name both versions and the fix.
func (s *workerSuite) TestFlagIsFalseOnANewerSchema(c *gc.C) {
	database := s.landNewerSchema(c)
	w, err := schemaguard.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Check(w.Check(), gc.Equals, false)
	fix := "replace this agent with a build that knows schema version " + strconv.Itoa(database)
	c.Check(w.Report()["not-ready"], gc.Matches, ".*version "+strconv.Itoa(database)+", newer than this build of Berth knows \\("+strconv.Itoa(database-1)+"\\).*"+fix)
	c.Check(s.logs.String(), gc.Matches, `(?s).*level=ERROR.*known-schema=`+strconv.Itoa(database-1)+` database-schema=`+strconv.Itoa(database)+`.*`)
	c.Check(strings.Contains(s.logs.String(), fix), gc.Equals, true, gc.Commentf("log: %s", s.logs))
	// Checks that find the same keep it running.
	c.Assert(s.clock.WaitAdvance(s.config.Interval, testkit.LongWait, 1), gc.IsNil)
	c.Assert(s.clock.WaitAdvance(s.config.Interval, testkit.LongWait, 1), gc.IsNil)
	workertest.CheckAlive(c, w)
}

// A newer schema landing while the worker runs bounces it at its next check, so that the
// engine starts it again with a false flag; the schema going back bounces it again.
func (s *workerSuite) TestBouncesWhenTheSchemaChanges(c *gc.C) {
	w, err := schemaguard.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.DirtyKill(c, w)
	// A check with nothing new keeps it running. The newer schema lands once that check is
	// done, so that it is the next check that finds it.
	c.Assert(s.clock.WaitAdvance(s.config.Interval, testkit.LongWait, 1), gc.IsNil)
	testkit.Eventually(c, testkit.Holds("the first timed check made", func() bool {
		return w.Report()["checks"] == 2
	}))
	workertest.CheckAlive(c, w)
	database := s.landNewerSchema(c)
	c.Assert(s.clock.WaitAdvance(s.config.Interval, testkit.LongWait, 1), gc.IsNil)
	c.Check(workertest.CheckKilled(c, w), gc.Equals, dependency.ErrBounce)

	again, err := schemaguard.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.DirtyKill(c, again)
	c.Check(again.Check(), gc.Equals, false)
	_, err = s.sql.Exec(`DELETE FROM schema_migrations WHERE version = $1`, database)
	c.Assert(err, gc.IsNil)
	c.Assert(s.clock.WaitAdvance(s.config.Interval, testkit.LongWait, 1), gc.IsNil)
	c.Check(workertest.CheckKilled(c, again), gc.Equals, dependency.ErrBounce)
}

// A check that fails for another reason (on a store closed here) leaves the flag true and
// the worker running: the store's fence holds meanwhile.
func (s *workerSuite) TestAFailedCheckKeepsTheFlag(c *gc.C) {
	closed, err := store.Open(context.Background(), "sqlite://"+filepath.Join(c.MkDir(), "closed.db"), store.Options{})
	c.Assert(err, gc.IsNil)
	closed.Close()
	s.config.Store = closed
	w, err := schemaguard.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Check(w.Check(), gc.Equals, true)
	c.Assert(s.clock.WaitAdvance(s.config.Interval, testkit.LongWait, 1), gc.IsNil)
	testkit.Eventually(c, testkit.Holds("a second failed check reported", func() bool {
		return strings.Count(s.logs.String(), "checking the schema version failed") == 2
	}))
	workertest.CheckAlive(c, w)
	c.Check(w.Report()["check-error"], gc.Not(gc.IsNil))
	c.Check(w.Report()["not-ready"], gc.IsNil)
}
