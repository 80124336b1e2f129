package watcher_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/juju/clock"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/domain/postgres/postgrestest"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/watcher"
)

// postgresSuite runs the resources watcher on a real database with the wall clock. Its
// waits are bounded by testkit.LongWait; none of them asserts timing.
type postgresSuite struct {
	ctx     context.Context
	cancel  context.CancelFunc
	cleanup func() // closes state and drops its database
	state   *postgres.State
}

var _ = gc.Suite(&postgresSuite{})

func (s *postgresSuite) SetUpTest(c *gc.C) {
	s.ctx, s.cancel = context.WithTimeout(context.Background(), time.Minute)
	var err error
	s.state, s.cleanup, err = postgrestest.New(s.ctx)
	c.Assert(err, gc.IsNil)
}

func (s *postgresSuite) TearDownTest(c *gc.C) {
	if s.cleanup != nil {
		s.cleanup()
	}
	s.cancel()
}

// start starts a watcher whose poll is too slow to matter: what it sees within
// testkit.LongWait comes from wake-ups and the reads that follow listening.
func (s *postgresSuite) start(c *gc.C) watcher.OwnedWatcher {
	return s.startWith(c, func(*watcher.ResourcesSettings) {})
}

// startWith starts a watcher on the wall clock with the test's settings as tune leaves them.
func (s *postgresSuite) startWith(c *gc.C, tune func(*watcher.ResourcesSettings)) watcher.OwnedWatcher {
	settings := watcher.ResourcesSettings{
		PollInterval: time.Hour,
		OverdueAfter: 15 * time.Second,
		GapTimeout:   time.Minute,
		BatchSize:    100,
		EventSize:    100,
		ReadAhead:    1000,

		OwnerPoliciesInterval: time.Minute,
	}
	tune(&settings)
	w, err := watcher.NewResourcesWatcher(watcher.ResourcesConfig{
		Source:            s.state,
		Clock:             clock.WallClock,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		ResourcesSettings: settings,
	})
	c.Assert(err, gc.IsNil)
	return w
}

func (s *postgresSuite) TestSeesInsertUpdateAndDelete(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	a := s.insert(c, "a")
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{a})

	s.exec(c, `UPDATE resources SET args = '{"slots": 2}' WHERE id = $1`, a)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{a})

	// The agent's progress writes are not desired-state changes: the next event is b's alone.
	s.exec(c, `UPDATE resources SET status = 'provisioning', status_message = 'working' WHERE id = $1`, a)
	b := s.insert(c, "b")
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{b})

	s.exec(c, `DELETE FROM resources WHERE id = $1`, a)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{a})
}

func (s *postgresSuite) TestSeesCommitsOutOfOrder(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	// slow takes its change-log number first and commits last.
	tx, slow := s.insertOpen(c, `INSERT INTO resources (type, name) VALUES ('runtime', 'slow') RETURNING id::text`)
	defer tx.Rollback(s.ctx)

	fast := s.insert(c, "fast")
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{fast})

	c.Assert(tx.Commit(s.ctx), gc.IsNil)
	c.Check(nextEvent(c, w), gc.DeepEquals, slow)
}

// A bulk insert holds more change-log numbers open than a page (BatchSize 100 here) when a
// small insert commits after them: the watcher reports the whole bulk insert once it commits,
// not only its newest page.
func (s *postgresSuite) TestSeesABulkInsertCommittedAfterALaterNumber(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	tx, bulk := s.insertOpen(c, `INSERT INTO resources (type, name) SELECT 'runtime', 'bulk-' || i FROM generate_series(1, 350) i RETURNING id::text`)
	defer tx.Rollback(s.ctx)

	small := s.insert(c, "small")
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{small})

	c.Assert(tx.Commit(s.ctx), gc.IsNil)
	slices.Sort(bulk)
	// The small one may come again: the watcher reads the resources needing attention after
	// its first event, and on a loaded machine that read can come after the small insert
	// committed, and after the log's report of it was delivered.
	var got []string
	for len(got) < len(bulk) {
		for _, id := range nextEvent(c, w) {
			if id != small {
				got = append(got, id)
			}
		}
	}
	slices.Sort(got)
	c.Check(got, gc.DeepEquals, bulk)
}

// A client's insert committed after the watcher gave its change-log number up as a gap (the
// transaction stayed open past GapTimeout: BEGIN; INSERT ...; and a pause before COMMIT) is
// reported all the same, once it has been quiet for GapTimeout.
func (s *postgresSuite) TestSeesAnInsertCommittedAfterItsGapTimedOut(c *gc.C) {
	w := s.startWith(c, func(settings *watcher.ResourcesSettings) {
		settings.PollInterval = 50 * time.Millisecond
		settings.GapTimeout = 300 * time.Millisecond
	})
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	tx, slow := s.insertOpen(c, `INSERT INTO resources (type, name) VALUES ('runtime', 'slow') RETURNING id::text`)
	defer tx.Rollback(s.ctx)
	small := s.insert(c, "small")
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{small})
	for deadline := time.Now().Add(testkit.LongWait); report(w)["gaps"] != 0; {
		if time.Now().After(deadline) {
			c.Fatalf("the open insert's number is still a gap after %s: %v", testkit.LongWait, report(w))
		}
		time.Sleep(10 * time.Millisecond)
	}

	c.Assert(tx.Commit(s.ctx), gc.IsNil)
	// Nothing provisions the small one here, so it is left quiet too and may come again.
	for got := nextEvent(c, w); !slices.Contains(got, slow[0]); got = nextEvent(c, w) {
		c.Check(got, gc.DeepEquals, []string{small})
	}
}

// insertOpen runs insert, which returns the ids it inserted, in a transaction it leaves open
// for the caller to commit (or roll back).
func (s *postgresSuite) insertOpen(c *gc.C, insert string) (pgx.Tx, []string) {
	tx, err := s.state.Pool().Begin(s.ctx)
	c.Assert(err, gc.IsNil)
	rows, err := tx.Query(s.ctx, insert)
	c.Assert(err, gc.IsNil)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	c.Assert(err, gc.IsNil)
	return tx, ids
}

func (s *postgresSuite) TestChangeAfterListenConnectionDropsArrives(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	first := s.listenBackend(c, 0)
	var terminated bool
	err := s.state.Pool().QueryRow(s.ctx, `SELECT pg_terminate_backend($1)`, first).Scan(&terminated)
	c.Assert(err, gc.IsNil)
	c.Assert(terminated, gc.Equals, true)

	a := s.insert(c, "after-drop")
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{a})
	s.listenBackend(c, first)
}

func (s *postgresSuite) TestChangesWhileNoWatcherRanAreSeenAtStart(c *gc.C) {
	pending := s.insert(c, "pending")
	changed := s.insert(c, "changed")
	s.exec(c, `UPDATE resources SET status = 'ready', observed_generation = generation WHERE id = $1`, changed)
	s.exec(c, `UPDATE resources SET args = '{"slots": 3}' WHERE id = $1`, changed)
	done := s.insert(c, "done")
	s.exec(c, `UPDATE resources SET status = 'ready', observed_generation = generation WHERE id = $1`, done)

	w := s.start(c)
	defer workertest.CleanKill(c, w)
	want := []string{pending, changed}
	slices.Sort(want) // the first events list them in id order
	c.Check(nextEvent(c, w), gc.DeepEquals, want)
}

func (s *postgresSuite) insert(c *gc.C, name string) string {
	var id string
	err := s.state.Pool().QueryRow(s.ctx,
		`INSERT INTO resources (type, name) VALUES ('runtime', $1) RETURNING id::text`, name).Scan(&id)
	c.Assert(err, gc.IsNil)
	return id
}

func (s *postgresSuite) exec(c *gc.C, sql string, args ...any) {
	_, err := s.state.Pool().Exec(s.ctx, sql, args...)
	c.Assert(err, gc.IsNil)
}

// listenBackend waits for the backend LISTENing for change-log wake-ups, other than the one
// with pid not, and returns its pid. Nothing announces the LISTEN, so it asks the server
// until it is there (testkit.Eventually).
func (s *postgresSuite) listenBackend(c *gc.C, not int32) int32 {
	var pid int32
	testkit.Eventually(c, func() error {
		var pids []int32
		rows, err := s.state.Pool().Query(s.ctx, `
			SELECT pid FROM pg_stat_activity
			 WHERE datname = current_database() AND query = 'LISTEN berth_resource_changes'
			   AND pid <> $1`, not)
		c.Assert(err, gc.IsNil)
		for rows.Next() {
			var pid int32
			c.Assert(rows.Scan(&pid), gc.IsNil)
			pids = append(pids, pid)
		}
		c.Assert(rows.Err(), gc.IsNil)
		if len(pids) == 1 {
			pid = pids[0]
			return nil
		}
		c.Assert(pids, gc.HasLen, 0)
		return errors.New("no backend is listening for change-log wake-ups")
	})
	return pid
}
