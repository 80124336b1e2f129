package healthcheck_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/healthcheck"
)

type workerSuite struct {
	t0       time.Time
	clock    *testclock.Clock
	store    *fakeStore
	env      *fakeEnviron
	environs *fakeEnvirons
	metrics  *fakeMetrics
	locks    *resourcelock.Set
	agents   *fakeAgents
	config   healthcheck.Config
}

var _ = gc.Suite(&workerSuite{})

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.clock = testclock.NewClock(s.t0)
	s.store = newFakeStore()
	s.env = newFakeEnviron(s.clock)
	s.environs = &fakeEnvirons{envs: map[string]environ.Environ{"pool": s.env}}
	s.metrics = newFakeMetrics()
	s.locks = new(resourcelock.Set)
	s.agents = newFakeAgents("agent-a")
	s.config = healthcheck.Config{
		Store:    s.store,
		Environs: s.environs,
		Clock:    s.clock,
		Rand:     sequence(0),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:  s.metrics,
		Locks:    s.locks,
		Agents:   s.agents,
		Settings: healthcheck.Settings{
			Agent:        domain.AgentIdentity{ID: "agent-a", TTL: 15 * time.Second},
			Interval:     time.Minute,
			Concurrency:  10,
			PageSize:     3,
			CheckTimeout: 10 * time.Minute, // longer than any test runs: a blocked check stays in flight
		},
	}
}

func (s *workerSuite) start(c *gc.C) worker.Worker {
	w, err := healthcheck.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	return w
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*healthcheck.Config)
		field  string
	}{
		{func(cfg *healthcheck.Config) { cfg.Store = nil }, "Store"},
		{func(cfg *healthcheck.Config) { cfg.Environs = nil }, "Environs"},
		{func(cfg *healthcheck.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *healthcheck.Config) { cfg.Rand = nil }, "Rand"},
		{func(cfg *healthcheck.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *healthcheck.Config) { cfg.Metrics = nil }, "Metrics"},
		{func(cfg *healthcheck.Config) { cfg.Locks = nil }, "Locks"},
		{func(cfg *healthcheck.Config) { cfg.Agent.ID = "" }, "agent ID .*--agent-id"},
		{func(cfg *healthcheck.Config) { cfg.Agent.TTL = 0 }, "agent TTL 0s .*--agent-ttl"},
		{func(cfg *healthcheck.Config) { cfg.Interval = 0 }, "Interval 0s"},
		{func(cfg *healthcheck.Config) { cfg.Concurrency = 0 }, "Concurrency 0 .*at least 1"},
		{func(cfg *healthcheck.Config) { cfg.PageSize = 0 }, "PageSize 0 .*at least 1"},
		{func(cfg *healthcheck.Config) { cfg.CheckTimeout = 0 }, "CheckTimeout 0s"},
	} {
		config := s.config
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := healthcheck.NewWorker(config)
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
}

// With 4 resources and a one-minute interval each check has a 15s slot; Rand places it in
// the slot. Pages of 3 are read as the round goes.
func (s *workerSuite) TestSpreadsChecksOverTheInterval(c *gc.C) {
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		s.store.add(id)
	}
	s.env.block = true
	s.config.Rand = sequence(0.5, 0.1, 0.9, 0.5)
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// Each check in flight holds a timeout timer besides the loop's own.
	c.Assert(s.clock.WaitAdvance(7500*time.Millisecond, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0.Add(7500 * time.Millisecond)})
	c.Assert(s.clock.WaitAdvance(9*time.Second, testkit.LongWait, 2), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r2", at: s.t0.Add(16500 * time.Millisecond)})
	// r3's draw of 0.9 puts it late in its slot (30s to 45s).
	c.Assert(s.clock.WaitAdvance(26*time.Second, testkit.LongWait, 3), gc.IsNil)
	s.env.calls.None(c, shortWait)
	c.Assert(s.clock.WaitAdvance(time.Second, testkit.LongWait, 3), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r3", at: s.t0.Add(43500 * time.Millisecond)})
	c.Assert(s.clock.WaitAdvance(9*time.Second, testkit.LongWait, 4), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r4", at: s.t0.Add(52500 * time.Millisecond)})
	s.store.waitFor(c, "the last page", func() bool { return len(s.store.pages) == 3 })
	c.Check(s.store.pages, gc.DeepEquals, []string{"/3/agent-a", "r3/3/agent-a", "r4/3/agent-a"})
	for range 4 {
		s.env.gate.Release()
	}

	// The next round starts a minute after the first.
	c.Assert(s.clock.WaitAdvance(7500*time.Millisecond, testkit.LongWait, 1), gc.IsNil)
	c.Assert(s.clock.WaitAdvance(7500*time.Millisecond, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0.Add(time.Minute + 7500*time.Millisecond)})
	s.env.gate.Release()
}

func (s *workerSuite) TestBoundedConcurrency(c *gc.C) {
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		s.store.add(id)
	}
	s.env.block = true
	s.config.Concurrency = 2
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0})
	c.Assert(s.clock.WaitAdvance(15*time.Second, testkit.LongWait, 2), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r2", at: s.t0.Add(15 * time.Second)})
	// r3 and r4 come due, but two checks are in flight (their timeouts are the only timers).
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 2), gc.IsNil)
	s.env.calls.None(c, shortWait)
	s.env.gate.Release()
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r3", at: s.t0.Add(45 * time.Second)})
	s.env.calls.None(c, shortWait)
	s.env.gate.Release()
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r4", at: s.t0.Add(45 * time.Second)})
	s.env.gate.Release()
	s.env.gate.Release()
}

func (s *workerSuite) TestUnhealthyAndBack(c *gc.C) {
	s.store.add("r1")
	s.config.Concurrency = 1 // a round's check ends before the next round's starts
	s.env.errs["r1"] = errors.New("host a is down")
	s.env.result["r1"] = &environ.Resource{ID: "r1", State: map[string]any{"host": "b"}, Config: map[string]any{"host": "b"},
		Repairs: []string{"reservation was missing; reserved again on b"}}
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	s.env.calls.Next(c)
	s.store.waitFor(c, "the failure recorded", func() bool { return len(s.store.records) == 1 })
	r := s.store.row("r1")
	c.Check(r.Status, gc.Equals, domain.StatusUnhealthy)
	c.Check(r.Reason, gc.Equals, domain.ReasonHealthCheckFailed)
	c.Check(r.StatusMessage, gc.Equals, "health check failing since 2026-01-01T00:00:00Z: host a is down")
	c.Check(r.State, gc.DeepEquals, map[string]any{"host": "b"})
	c.Check(r.Config, gc.DeepEquals, map[string]any{"host": "b"})
	c.Check(s.store.records[0].Repairs, gc.DeepEquals, []string{"reservation was missing; reserved again on b"})

	// Still failing, for another reason: since stays.
	s.env.set(func(e *fakeEnviron) { e.errs["r1"] = errors.New("timed out"); e.result["r1"] = nil })
	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	s.env.calls.Next(c)
	s.store.waitFor(c, "the new reason recorded", func() bool { return len(s.store.records) == 2 })
	c.Check(s.store.row("r1").StatusMessage, gc.Equals, "health check failing since 2026-01-01T00:00:00Z: timed out")
	c.Check(s.store.records[1].Reason, gc.Equals, domain.ReasonHealthCheckFailed)

	s.env.set(func(e *fakeEnviron) { delete(e.errs, "r1") })
	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	s.env.calls.Next(c)
	s.store.waitFor(c, "the recovery recorded", func() bool { return len(s.store.records) == 3 })
	r = s.store.row("r1")
	c.Check(r.Status, gc.Equals, domain.StatusReady)
	c.Check(r.Reason, gc.Equals, domain.ReasonRecovered)
	c.Check(r.StatusMessage, gc.Equals, "ready at generation 1: health check passing again since 2026-01-01T00:02:00Z (failed since 2026-01-01T00:00:00Z)")
	c.Check(r.UnhealthySince, gc.IsNil)

	// Healthy and unchanged: nothing is written.
	for range 2 {
		c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
		s.env.calls.Next(c)
	}
	c.Check(s.store.records, gc.HasLen, 3)
	c.Check(s.store.row("r1").Status, gc.Equals, domain.StatusReady)
	c.Check(s.store.row("r1").Reason, gc.Equals, domain.ReasonRecovered) // until the next reconcile
}

// repairEach has the environ find each resource's deployment missing and re-apply it.
func (s *workerSuite) repairEach(ids ...string) {
	for _, id := range ids {
		s.env.errs[id] = errors.New("deployment was missing")
		s.env.result[id] = &environ.Resource{ID: id, Repairs: []string{"deployment " + id + " re-applied: missing"}}
	}
}

// A check whose record is refused as stale (the row moved on while the environ repaired it)
// drops the status it found, but records the repairs, which were made all the same; a row
// that is gone records nothing.
func (s *workerSuite) TestRepairsOfAStaleCheckAreRecorded(c *gc.C) {
	s.store.add("r1")
	s.store.add("r2")
	s.store.recordErr = map[string]error{
		"r1": fmt.Errorf("resource r1: %w", domain.ErrNotFound),
		"r2": fmt.Errorf("resource r2 was claimed since it was checked (%w)", domain.ErrStale),
	}
	s.config.Concurrency = 1 // r1's check ends before r2's starts
	s.repairEach("r1", "r2")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(s.env.calls.Next(c).id, gc.Equals, "r1")
	s.store.waitFor(c, "r1's record tried", func() bool { return len(s.store.records) == 1 })
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil) // the round spreads its two checks
	c.Check(s.env.calls.Next(c).id, gc.Equals, "r2")
	s.store.waitFor(c, "r2's repair recorded", func() bool { return len(s.store.repairs["r2"]) == 1 })
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	c.Check(s.store.repairs, gc.DeepEquals, map[string][]string{"r2": {"deployment r2 re-applied: missing"}})
	c.Check(s.store.records, gc.HasLen, 2)
	c.Check(s.store.rows["r2"].Status, gc.Equals, domain.StatusReady)
}

// A repair whose record failed (the store unreachable) is kept and recorded at the start of a
// later round, though the checks after it find nothing to repair; while the store refuses,
// the kept repairs ride along with each check's record and are kept again; kept repairs of
// a resource that is gone are dropped.
func (s *workerSuite) TestRepairsWhoseRecordFailedAreRecordedLater(c *gc.C) {
	s.store.add("r1")
	s.store.add("r2")
	unreachable := errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
	s.store.recordErr = map[string]error{"r1": unreachable, "r2": unreachable}
	s.config.Concurrency = 1 // r1's check ends before r2's starts
	s.repairEach("r1", "r2")
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	report := w.(reporter).Report

	c.Check(s.env.calls.Next(c).id, gc.Equals, "r1")
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c).id, gc.Equals, "r2")
	s.store.waitFor(c, "both records tried", func() bool { return len(s.store.records) == 2 })
	waitReport(c, w.(reporter), map[string]any{"unrecorded-repairs": 2})

	// The drift is gone; the store still refuses everything.
	s.env.set(func(e *fakeEnviron) { e.errs, e.result = map[string]error{}, map[string]*environ.Resource{} })
	s.store.mu.Lock()
	s.store.repairsErr = unreachable
	s.store.mu.Unlock()
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c).id, gc.Equals, "r1") // the second round has begun
	s.store.waitFor(c, "r1's kept repair tried with its check", func() bool { return len(s.store.records) == 3 })
	s.store.mu.Lock()
	c.Check(s.store.repairCalls, gc.DeepEquals, []string{"r1"}) // the first refusal stops the rest
	c.Check(s.store.records[2].Repairs, gc.DeepEquals, []string{"deployment r1 re-applied: missing"})
	s.store.mu.Unlock()
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c).id, gc.Equals, "r2")
	s.store.waitFor(c, "r2's kept repair tried with its check", func() bool { return len(s.store.records) == 4 })
	waitReport(c, w.(reporter), map[string]any{"unrecorded-repairs": 2, "last-record-error": unreachable.Error()})

	// The store is back, and r2 is gone.
	s.store.mu.Lock()
	s.store.recordErr, s.store.repairsErr = nil, nil
	delete(s.store.rows, "r2")
	s.store.mu.Unlock()
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c).id, gc.Equals, "r1") // the third round has begun
	s.store.mu.Lock()
	c.Check(s.store.repairCalls, gc.DeepEquals, []string{"r1", "r1", "r2"})
	c.Check(s.store.repairs, gc.DeepEquals, map[string][]string{"r1": {"deployment r1 re-applied: missing"}})
	c.Check(s.store.records, gc.HasLen, 4) // the healthy checks after the repairs change nothing
	s.store.mu.Unlock()
	_, kept := report()["unrecorded-repairs"]
	c.Check(kept, gc.Equals, false)
}

// Repairs kept from a check whose record failed go first in the next record of the
// resource, ahead of that check's own repairs, so the history keeps the order they were made
// in, even when the store refused them at the round's start.
func (s *workerSuite) TestKeptRepairsGoFirstInTheNextRecord(c *gc.C) {
	s.store.add("r1")
	unreachable := errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
	s.store.recordErr = map[string]error{"r1": unreachable}
	s.config.Concurrency = 1
	s.repairEach("r1")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	s.env.calls.Next(c)
	waitReport(c, w.(reporter), map[string]any{"unrecorded-repairs": 1})

	s.env.set(func(e *fakeEnviron) {
		e.result["r1"] = &environ.Resource{ID: "r1", Repairs: []string{"service r1 re-applied: missing"}}
	})
	s.store.mu.Lock()
	s.store.recordErr, s.store.repairsErr = nil, unreachable
	s.store.mu.Unlock()
	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	s.env.calls.Next(c)
	s.store.waitFor(c, "the second check recorded", func() bool { return len(s.store.records) == 2 })
	s.store.mu.Lock()
	c.Check(s.store.repairCalls, gc.DeepEquals, []string{"r1"}) // refused at the round's start
	c.Check(s.store.records[1].Repairs, gc.DeepEquals, []string{"deployment r1 re-applied: missing", "service r1 re-applied: missing"})
	s.store.mu.Unlock()
	waitReport(c, w.(reporter), map[string]any{"unrecorded-repairs": nil})
}

// A check whose broker is unavailable (the API server throttles or fails) says nothing of the
// resource: nothing is recorded, and the row stays ready until a check can tell.
func (s *workerSuite) TestUnavailableBrokerRecordsNothing(c *gc.C) {
	s.store.add("r1")
	s.config.Concurrency = 1
	s.env.errs["r1"] = environ.Unavailable(errors.New("the server is currently unable to handle the request"),
		environ.UnavailableServer, "503 Service Unavailable from the API server", 0)
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	s.env.calls.Next(c)
	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	s.env.calls.Next(c) // the first round's check has ended: the second's has begun
	c.Check(s.store.records, gc.HasLen, 0)
	c.Check(s.store.row("r1").Status, gc.Equals, domain.StatusReady)

	s.env.set(func(e *fakeEnviron) { e.errs["r1"] = errors.New("host a is down") })
	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	s.env.calls.Next(c)
	s.store.waitFor(c, "a real failure recorded", func() bool { return len(s.store.records) == 1 })
	c.Check(s.store.row("r1").Status, gc.Equals, domain.StatusUnhealthy)
}

// A ready row that names no reason of ready (written before reasons were kept) is recorded
// Available by its first passing check, and then left alone.
func (s *workerSuite) TestReadyRowWithoutAReasonIsRecordedAvailable(c *gc.C) {
	s.store.add("r1")
	s.store.mu.Lock()
	s.store.rows["r1"].Reason = ""
	s.store.mu.Unlock()
	s.config.Concurrency = 1
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	s.env.calls.Next(c)
	s.store.waitFor(c, "the reason recorded", func() bool { return len(s.store.records) == 1 })
	r := s.store.row("r1")
	c.Check(r.Status, gc.Equals, domain.StatusReady)
	c.Check(r.Reason, gc.Equals, domain.ReasonAvailable)
	c.Check(r.StatusMessage, gc.Equals, "ready at generation 1")
	c.Check(s.store.records[0].Repairs, gc.HasLen, 0)

	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	s.env.calls.Next(c)
	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	s.env.calls.Next(c) // the second round's check has ended: the third's has begun
	c.Check(s.store.records, gc.HasLen, 1)
}

func (s *workerSuite) TestUnreadableRowIsRecordedAsErrorNotChecked(c *gc.C) {
	s.store.add("r1")
	s.store.add("r2")
	s.store.mu.Lock()
	s.store.rows["r1"].Config = nil
	s.store.rows["r1"].Unreadable = []domain.UnreadableColumn{{Column: "config", Reason: "number 1e+400 out of range"}}
	s.store.mu.Unlock()
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	s.store.waitFor(c, "the unreadable row recorded", func() bool { return len(s.store.records) == 1 })
	r := s.store.row("r1")
	c.Check(r.Status, gc.Equals, domain.StatusError)
	c.Check(r.Reason, gc.Equals, domain.ReasonUnreadableRow)
	c.Check(r.StatusMessage, gc.Equals, "config is not JSON Berth can read: number 1e+400 out of range: fix the column with SQL or delete the resource")
	s.env.calls.None(c, shortWait) // r1 is never handed to the environ

	// The round goes on with the next resource, in its slot.
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c).id, gc.Equals, "r2")
	c.Check(s.metrics.wait(c, "resource", 2), gc.DeepEquals, []observation{
		{"resource", "pool", healthcheck.ResultError}, {"resource", "pool", healthcheck.ResultHealthy}})
	workertest.CheckAlive(c, w)
}

func (s *workerSuite) TestAResourceThatMovedOnKeepsItsRow(c *gc.C) {
	s.store.add("r1")
	s.env.block = true
	s.env.errs["r1"] = errors.New("down")
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.env.calls.Next(c)
	// A delete is requested while the check runs: the check's failure is dropped.
	s.store.mu.Lock()
	s.store.rows["r1"].Status = domain.StatusDeleting
	s.store.mu.Unlock()
	s.env.gate.Release()
	s.store.waitFor(c, "the attempt to record", func() bool { return len(s.store.records) == 1 })
	c.Check(s.store.row("r1").Status, gc.Equals, domain.StatusDeleting)
	// The check is still counted by what it found.
	c.Check(s.metrics.wait(c, "resource", 1), gc.DeepEquals, []observation{{"resource", "pool", healthcheck.ResultUnhealthy}})
	workertest.CheckAlive(c, w)
}

func (s *workerSuite) TestKillCancelsChecksInFlight(c *gc.C) {
	s.store.add("r1")
	s.env.block = true
	w := s.start(c)
	s.env.calls.Next(c)
	workertest.CleanKill(c, w)
	c.Check(s.store.records, gc.HasLen, 0)
}
