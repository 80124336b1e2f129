package changelog_test

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/domain/postgres/postgrestest"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/changelog"
)

// postgresSuite prunes a real change log; the test clock says when, the database's rows say
// what was written when.
type postgresSuite struct {
	ctx     context.Context
	cancel  context.CancelFunc
	cleanup func() // closes state and drops its database
	state   *postgres.State
	term    domain.Term // the leadership the tests prune under
}

var _ = gc.Suite(&postgresSuite{})

func (s *postgresSuite) SetUpTest(c *gc.C) {
	s.ctx, s.cancel = context.WithTimeout(context.Background(), time.Minute)
	var err error
	s.state, s.cleanup, err = postgrestest.New(s.ctx)
	c.Assert(err, gc.IsNil)
	session, err := s.state.RegisterAgent(s.ctx, domain.AgentInfo{ID: "agent-a", Version: "test"})
	c.Assert(err, gc.IsNil)
	_, leads, err := s.state.ClaimLeadership(s.ctx, "agent-a", session, time.Hour)
	c.Assert(err, gc.IsNil)
	c.Assert(leads, gc.Equals, true)
	s.term = domain.Term{Holder: "agent-a", Session: session}
}

func (s *postgresSuite) TearDownTest(c *gc.C) {
	if s.cleanup != nil {
		s.cleanup()
	}
	s.cancel()
}

func (s *postgresSuite) TestPrunesEntriesOlderThanRetain(c *gc.C) {
	_, err := s.state.Pool().Exec(s.ctx, `
		INSERT INTO change_log (resource_id, created_at) VALUES
			(gen_random_uuid(), now() - interval '3 hours'),
			(gen_random_uuid(), now() - interval '2 hours'),
			(gen_random_uuid(), now())`)
	c.Assert(err, gc.IsNil)
	s.pruneOnce(c, time.Now(), time.Hour, 2*time.Hour)

	var left int
	err = s.state.Pool().QueryRow(s.ctx, `SELECT count(*) FROM change_log`).Scan(&left)
	c.Assert(err, gc.IsNil)
	c.Check(left, gc.Equals, 1)
}

func (s *postgresSuite) TestPrunesHistoryOlderThanHistoryRetain(c *gc.C) {
	_, err := s.state.Pool().Exec(s.ctx, `
		INSERT INTO resource_events (resource_id, at, kind, status, message) VALUES
			(gen_random_uuid(), now() - interval '3 hours', 'status', 'pending', 'old'),
			(gen_random_uuid(), now() - interval '1 hour', 'status', 'pending', 'new');
		INSERT INTO capacity_samples (at, provisioner, host, unit, total, used) VALUES
			(now() - interval '3 hours', 'pool', '', 'slots', 10, 1),
			(now() - interval '3 hours', 'pool', 'http://a', 'slots', 10, 1),
			(now() - interval '1 hour', 'pool', '', 'slots', 10, 2)`)
	c.Assert(err, gc.IsNil)
	s.pruneOnce(c, time.Now(), time.Hour, 2*time.Hour)

	var events, samples int
	err = s.state.Pool().QueryRow(s.ctx, `SELECT (SELECT count(*) FROM resource_events), (SELECT count(*) FROM capacity_samples)`).Scan(&events, &samples)
	c.Assert(err, gc.IsNil)
	c.Check(events, gc.Equals, 1)
	c.Check(samples, gc.Equals, 1)
}

// TestPrunesByTheDatabaseClock runs the worker on a clock ten minutes ahead of the
// database's: what is old is decided by the database's clock, so the entries written in the
// last Retain stay, however far the worker's clock is ahead.
func (s *postgresSuite) TestPrunesByTheDatabaseClock(c *gc.C) {
	_, err := s.state.Pool().Exec(s.ctx, `
		INSERT INTO change_log (resource_id, created_at) VALUES
			(gen_random_uuid(), now() - interval '6 minutes'),
			(gen_random_uuid(), now() - interval '1 minute'),
			(gen_random_uuid(), now())`)
	c.Assert(err, gc.IsNil)
	s.pruneOnce(c, time.Now().Add(10*time.Minute), 5*time.Minute, time.Hour)

	var left int
	err = s.state.Pool().QueryRow(s.ctx, `SELECT count(*) FROM change_log`).Scan(&left)
	c.Assert(err, gc.IsNil)
	c.Check(left, gc.Equals, 2, gc.Commentf("pruned the entries the worker's clock (11 minutes ahead) found older than 5 minutes"))
}

// pruneOnce runs the worker on a test clock that starts at start until it has pruned once,
// with the retentions given, and stops it.
func (s *postgresSuite) pruneOnce(c *gc.C, start time.Time, retain, historyRetain time.Duration) {
	clk := testclock.NewClock(start)
	w, err := changelog.NewWorker(changelog.Config{
		Pruner: s.state,
		Clock:  clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Term:   s.term,
		Settings: changelog.Settings{
			Interval:      time.Minute,
			Retain:        retain,
			HistoryRetain: historyRetain,
		},
	})
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Assert(clk.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	// The timer is set again once the prune is done.
	c.Assert(clk.WaitAdvance(0, testkit.LongWait, 1), gc.IsNil)
}
