package provisioner_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/metrics"
	"github.com/berth-dev/berth/watcher"
	"github.com/berth-dev/berth/worker/provisioner"
)

func TestPackage(t *testing.T) { gc.TestingT(t) }

type workerSuite struct {
	clock   *testclock.Clock
	state   *fakeState
	env     *fakeEnviron
	set     *environ.Set
	watcher *fakeWatcher
	logs    *syncBuffer
	metrics *fakeMetrics
	locks   *resourcelock.Set

	mu   sync.Mutex
	rand float64
}

var _ = gc.Suite(&workerSuite{})

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	backoffBase      = 10 * time.Second
	backoffMax       = 5 * time.Minute
	capacityRetry    = time.Minute
	reconcileTimeout = 5 * time.Minute
	leaseTTL         = 10 * time.Minute
	holder           = "agent-1"
)

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(epoch)
	s.state = newFakeState(s.clock)
	s.env = newFakeEnviron()
	s.set = &environ.Set{Default: "pool", Environs: map[string]environ.Environ{"pool": s.env}, Catalog: shippedCatalog()}
	s.watcher = newFakeWatcher()
	s.logs = &syncBuffer{}
	s.metrics = newFakeMetrics()
	s.locks = new(resourcelock.Set)
	s.rand = 0.5
}

func (s *workerSuite) setRand(r float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rand = r
}

func (s *workerSuite) config() provisioner.Config {
	return provisioner.Config{
		State:      s.state,
		Environs:   s.set,
		NewWatcher: func() (provisioner.Watcher, error) { return s.watcher, nil },
		Clock:      s.clock,
		Rand: func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.rand
		},
		Logger:  slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: s.metrics,
		Locks:   s.locks,
		Settings: provisioner.Settings{
			Agent:            domain.AgentIdentity{ID: holder, TTL: 15 * time.Second},
			Concurrency:      2,
			AwaitConcurrency: 2,
			LeaseTTL:         leaseTTL,
			ReconcileTimeout: reconcileTimeout,
			BackoffBase:      backoffBase,
			BackoffMax:       backoffMax,
			CapacityRetry:    capacityRetry,
			ShareGrace:       2 * time.Second,

			OwnerPoliciesInterval: 10 * time.Second,
		},
	}
}

func (s *workerSuite) start(c *gc.C, cfg provisioner.Config) worker.Worker {
	w, err := provisioner.NewWorker(cfg)
	c.Assert(err, gc.IsNil)
	return w
}

func ready(gen int64) func(r *domain.Resource) bool {
	return func(r *domain.Resource) bool {
		return r.Status == domain.StatusReady && r.ObservedGeneration == gen
	}
}

func statuses(updates []domain.ProgressUpdate) []domain.Status {
	out := make([]domain.Status, len(updates))
	for i, u := range updates {
		out[i] = u.Status
	}
	return out
}

func reasons(updates []domain.ProgressUpdate) []domain.Reason {
	out := make([]domain.Reason, len(updates))
	for i, u := range updates {
		out[i] = u.Reason
	}
	return out
}

func (s *workerSuite) TestPendingToReady(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Name: "web", Owner: "acme", Args: map[string]any{"slots": 2}})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "ready", ready(1))
	s.state.waitIdle(c, "r1", 1)

	c.Check(row.Provisioner, gc.Equals, "pool") // the default, pinned
	c.Check(row.Config, gc.DeepEquals, map[string]any{"host": "host-r1"})
	c.Check(row.State, gc.DeepEquals, map[string]any{"generation": int64(1)})
	c.Check(row.StatusMessage, gc.Equals, "ready at generation 1")
	c.Check(row.Reason, gc.Equals, domain.ReasonAvailable)
	c.Check(row.Attempts, gc.Equals, 0)
	c.Check(row.NextAttemptAt, gc.IsNil)
	c.Check(row.LastError, gc.Equals, "")

	// The claim recorded the start, pinning the default provisioner, in the same write.
	starts := s.state.started("r1")
	c.Assert(starts, gc.HasLen, 1)
	c.Check(starts[0].Status, gc.Equals, domain.StatusProvisioning)
	c.Check(starts[0].StatusMessage, gc.Equals, "provisioning generation 1")
	c.Check(starts[0].Reason, gc.Equals, domain.ReasonProvisioning)
	c.Check(starts[0].Provisioner, gc.Equals, "pool")
	updates := s.state.progress("r1")
	c.Check(statuses(updates), gc.DeepEquals, []domain.Status{domain.StatusProvisioning, domain.StatusReady})
	c.Check(reasons(updates), gc.DeepEquals, []domain.Reason{domain.ReasonAwaitingReady, domain.ReasonAvailable})
	c.Check(updates[0].State, gc.DeepEquals, map[string]any{"generation": int64(1)}) // saved before AwaitReady
	// The ready record gives up the lease itself: no separate release.
	c.Check([]bool{updates[0].ReleaseLease, updates[1].ReleaseLease}, gc.DeepEquals, []bool{false, true})
	c.Check(s.state.releaseCallCount("r1"), gc.Equals, 0)
	c.Check(s.env.lastOpts(), gc.DeepEquals, environ.ResourceOptions{
		Name: "web", Owner: "acme", Args: map[string]any{"slots": 2}, Generation: 1,
	})
	c.Check(s.env.callCount("await"), gc.Equals, 1)

	c.Check(s.metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeReady})
	c.Check(s.metrics.reconcileObservations(), gc.DeepEquals, []reconcileObservation{
		{provisioner: "pool", typ: domain.ResourceTypeRuntime, outcome: provisioner.OutcomeReady, d: 0}, // the clock stood still
	})
	c.Check(s.metrics.createToReadyObservations(), gc.DeepEquals, []reconcileObservation{
		{provisioner: "pool", typ: domain.ResourceTypeRuntime, d: 0},
	})
}

// A broker that keeps its state itself needs it saved before the wait no more: the wait is
// recorded with the attempt's next write, the ready record or the failure, one write fewer.
func (s *workerSuite) TestKeptStateIsRecordedWithTheNextWrite(c *gc.C) {
	s.env.kept = true
	s.env.script("await", errors.New("host not serving yet"))
	s.state.add(domain.Resource{ID: "r1", Args: map[string]any{"slots": 1}})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "retry scheduled", func(r *domain.Resource) bool { return r.Attempts == 1 })
	s.state.waitIdle(c, "r1", 1)
	c.Assert(s.clock.WaitAdvance(5*time.Second, testkit.LongWait, 1), gc.IsNil) // rand 0.5: the first retry after 5s
	s.state.waitRow(c, "r1", "ready", ready(1))

	waiting := &domain.StatusStep{Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady,
		Message: "provisioning generation 1: waiting for it to serve"}
	updates := s.state.progress("r1")
	c.Check(statuses(updates), gc.DeepEquals, []domain.Status{
		domain.StatusProvisioning, domain.StatusProvisioning, domain.StatusReady,
	})
	c.Check(reasons(updates), gc.DeepEquals, []domain.Reason{
		domain.ReasonBackoff, domain.ReasonProvisioning, domain.ReasonAvailable,
	})
	c.Check(updates[0].StatusMessage, gc.Matches, "attempt 1 failed: await ready: host not serving yet; retrying at .*")
	c.Check(updates[0].Passed, gc.DeepEquals, waiting)
	c.Check(updates[1].StatusMessage, gc.Equals, "provisioning generation 1") // the retry's start
	c.Check(updates[1].Passed, gc.IsNil)
	c.Check(updates[2].StatusMessage, gc.Equals, "ready at generation 1")
	c.Check(updates[2].Passed, gc.DeepEquals, waiting)
	c.Check(updates[2].State, gc.DeepEquals, map[string]any{"generation": int64(1)})
	c.Check(s.env.callCount("await"), gc.Equals, 2)
}

func (s *workerSuite) TestGenerationBump(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Args: map[string]any{"slots": 1}})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)
	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
	s.state.waitIdle(c, "r1", 1)

	s.state.updateArgs("r1", map[string]any{"slots": 3})
	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "ready at generation 2", ready(2))

	c.Check(row.Generation, gc.Equals, int64(2))
	c.Check(row.State, gc.DeepEquals, map[string]any{"generation": int64(2)})
	c.Check(s.env.callCount("reconcile"), gc.Equals, 2)
	c.Check(s.env.lastOpts().Args, gc.DeepEquals, map[string]any{"slots": 3})
	// The broker gets back the state it returned for generation 1.
	c.Check(s.env.lastInput().State, gc.DeepEquals, map[string]any{"generation": int64(1)})
	// Generation 1 was started by its claim; a ready row with new args is not untouched, so
	// generation 2's start is recorded on its own.
	c.Check(s.state.started("r1"), gc.HasLen, 1)
	updates := s.state.progress("r1")
	c.Check(statuses(updates[2:]), gc.DeepEquals, []domain.Status{
		domain.StatusProvisioning, domain.StatusProvisioning, domain.StatusReady,
	})
	c.Check(updates[2].StatusMessage, gc.Equals, "provisioning generation 2")
	c.Check(reasons(updates[2:]), gc.DeepEquals, []domain.Reason{
		domain.ReasonProvisioning, domain.ReasonAwaitingReady, domain.ReasonAvailable,
	})
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeReady, provisioner.OutcomeReady})
	c.Check(s.metrics.createToReadyObservations(), gc.HasLen, 1) // only the first ready
}

func (s *workerSuite) TestReadyAtGenerationIsLeftAlone(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Provisioner: "pool", Status: domain.StatusReady, ObservedGeneration: 1})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitIdle(c, "r1", 1)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)
	c.Check(s.state.progress("r1"), gc.HasLen, 0)
	c.Check(s.metrics.reconcileObservations(), gc.HasLen, 0) // nothing to do is no outcome
}

func (s *workerSuite) TestDelete(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)
	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
	s.state.waitIdle(c, "r1", 1)

	s.state.requestDelete("r1")
	s.watcher.send(c, "r1")
	s.state.waitGone(c, "r1")

	c.Check(s.env.callCount("deprovision"), gc.Equals, 1)
	c.Check(s.env.lastInput().State, gc.DeepEquals, map[string]any{"generation": int64(1)})
	c.Check(s.env.lastInput().Config, gc.DeepEquals, map[string]any{"host": "host-r1"})
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeReady, provisioner.OutcomeDeleted})
}

func (s *workerSuite) TestDeleteNeverProvisioned(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Status: domain.StatusDeleting})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitGone(c, "r1")
	c.Check(s.env.callCount("deprovision"), gc.Equals, 0)
	c.Check(s.metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeDeleted})
	c.Check(s.metrics.reconcileObservations()[0].provisioner, gc.Equals, metrics.Unknown) // none was ever pinned
}

func (s *workerSuite) TestDeprovisionFailureRetried(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Provisioner: "pool", Status: domain.StatusDeleting, State: map[string]any{"host": "a"}})
	s.env.script("deprovision", errors.New("host unreachable"))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "failed deprovision recorded", func(r *domain.Resource) bool { return r.Attempts == 1 })
	s.state.waitIdle(c, "r1", 1)
	due := epoch.Add(backoffBase / 2) // rand 0.5 of a 10s ceiling
	c.Check(row.Status, gc.Equals, domain.StatusDeleting)
	c.Check(row.Reason, gc.Equals, domain.ReasonBackoff)
	c.Check(row.NextAttemptAt, gc.DeepEquals, &due)
	c.Check(row.LastError, gc.Equals, "deprovision: host unreachable")
	c.Check(row.StatusMessage, gc.Equals, "deprovision attempt 1 failed: deprovision: host unreachable; retrying at 2025-03-01T12:00:05Z")

	c.Assert(s.clock.WaitAdvance(backoffBase/2, testkit.LongWait, 1), gc.IsNil)
	s.state.waitGone(c, "r1")
	c.Check(s.env.callCount("deprovision"), gc.Equals, 2)
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeRetry, provisioner.OutcomeDeleted})
}

func (s *workerSuite) TestTransientFailureRetriedWithBackoff(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	s.env.script("reconcile", errors.New("host busy"))
	s.setRand(0.8)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "failure recorded", func(r *domain.Resource) bool { return r.Attempts == 1 })
	s.state.waitIdle(c, "r1", 1)
	delay := 8 * time.Second // 0.8 * min(5m, 10s * 2^0)
	due := epoch.Add(delay)
	c.Check(row.Status, gc.Equals, domain.StatusProvisioning)
	c.Check(row.Reason, gc.Equals, domain.ReasonBackoff)
	c.Check(row.NextAttemptAt, gc.DeepEquals, &due)
	c.Check(row.LastError, gc.Equals, "reconcile: host busy")
	c.Check(row.StatusMessage, gc.Equals, "attempt 1 failed: reconcile: host busy; retrying at 2025-03-01T12:00:08Z")
	c.Check(s.state.releaseCallCount("r1"), gc.Equals, 0) // the failure's record gave up the lease
	waitReport(c, w, "scheduled-retries", 1)

	// Nothing runs before the retry is due.
	c.Assert(s.clock.WaitAdvance(delay-time.Second, testkit.LongWait, 1), gc.IsNil)
	s.env.entered.None(c, shortWait)
	c.Check(s.state.claimCount("r1"), gc.Equals, 1)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 1)

	c.Assert(s.clock.WaitAdvance(time.Second, testkit.LongWait, 1), gc.IsNil)
	row = s.state.waitRow(c, "r1", "ready", ready(1))
	c.Check(s.env.callCount("reconcile"), gc.Equals, 2)
	c.Check(row.Attempts, gc.Equals, 0)
	c.Check(row.LastError, gc.Equals, "")
	c.Check(row.NextAttemptAt, gc.IsNil)

	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeRetry, provisioner.OutcomeReady})
	// Created at the epoch, ready after the 8s backoff: the row's own timestamps say so.
	c.Check(s.metrics.createToReadyObservations(), gc.DeepEquals, []reconcileObservation{
		{provisioner: "pool", typ: domain.ResourceTypeRuntime, d: delay},
	})
}

func (s *workerSuite) TestBackoffGrowsWithAttempts(c *gc.C) {
	// The third failure in a row: ceiling 10s * 2^2 = 40s.
	s.state.add(domain.Resource{ID: "r1", Status: domain.StatusProvisioning, Attempts: 2, LastError: "earlier"})
	s.env.script("reconcile", errors.New("boom"))
	s.setRand(0.999)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "third failure", func(r *domain.Resource) bool { return r.Attempts == 3 })
	due := epoch.Add(time.Duration(0.999 * float64(40*time.Second))).Truncate(time.Microsecond)
	c.Check(row.NextAttemptAt, gc.DeepEquals, &due)
}

func (s *workerSuite) TestBackoffFloor(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	s.env.script("reconcile", errors.New("boom"))
	s.setRand(0)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "failure", func(r *domain.Resource) bool { return r.Attempts == 1 })
	due := epoch.Add(backoffBase / 2)
	c.Check(row.NextAttemptAt, gc.DeepEquals, &due)
}

func (s *workerSuite) TestPermanentErrorWaitsForNewGeneration(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Args: map[string]any{"slots": 0}})
	s.env.script("reconcile", environ.Permanent(&domain.FieldError{Field: "args.slots", Msg: "must be at least 1, got 0"}))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "error", func(r *domain.Resource) bool { return r.Status == domain.StatusError })
	s.state.waitIdle(c, "r1", 1)
	c.Check(row.StatusMessage, gc.Equals, "reconcile: args.slots: must be at least 1, got 0")
	c.Check(row.Reason, gc.Equals, domain.ReasonBrokerError)
	c.Check(row.LastError, gc.Equals, row.StatusMessage)
	c.Check(row.NextAttemptAt, gc.IsNil)
	// No retry is scheduled: the clock has nothing waiting on it.
	c.Assert(s.clock.WaitAdvance(backoffMax, testkit.LongWait, 0), gc.IsNil)
	c.Check(s.state.claimCount("r1"), gc.Equals, 1)

	// Another event at the same generation (e.g. after a restart) leaves it alone.
	s.watcher.send(c, "r1")
	s.state.waitIdle(c, "r1", 2)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 1)
	c.Check(s.metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomePermanent}) // the second look is no outcome

	s.state.updateArgs("r1", map[string]any{"slots": 1})
	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready at generation 2", ready(2))
	c.Check(s.env.callCount("reconcile"), gc.Equals, 2)
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomePermanent, provisioner.OutcomeReady})
}

func (s *workerSuite) TestUnreadableRowGoesToErrorAndIsRetriedWithBackoff(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Provisioner: "pool",
		Unreadable: []domain.UnreadableColumn{{Column: "config", Reason: "number 1e+400 out of range"}}})
	s.setRand(0.8)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "first failure", func(r *domain.Resource) bool { return r.Attempts == 1 })
	s.state.waitIdle(c, "r1", 1)
	c.Check(row.Status, gc.Equals, domain.StatusError)
	c.Check(row.Reason, gc.Equals, domain.ReasonUnreadableRow)
	c.Check(row.StatusMessage, gc.Equals, "config is not JSON Berth can read: number 1e+400 out of range: "+
		"fix the column with SQL or delete the resource; looking again at 2025-03-01T12:00:08Z")
	due := epoch.Add(8 * time.Second) // 0.8 * 10s * 2^0
	c.Check(row.NextAttemptAt, gc.DeepEquals, &due)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)

	// Still unreadable when the retry is due: the next look backs off further.
	c.Assert(s.clock.WaitAdvance(8*time.Second, testkit.LongWait, 1), gc.IsNil)
	row = s.state.waitRow(c, "r1", "second failure", func(r *domain.Resource) bool { return r.Attempts == 2 })
	s.state.waitIdle(c, "r1", 2)
	due = due.Add(16 * time.Second) // 0.8 * 10s * 2^1
	c.Check(row.NextAttemptAt, gc.DeepEquals, &due)

	// Fixed with SQL, which logs no change: the backed-off retry finds it readable.
	s.state.edit("r1", func(r *domain.Resource) { r.Unreadable, r.Config = nil, map[string]any{} })
	c.Assert(s.clock.WaitAdvance(16*time.Second, testkit.LongWait, 1), gc.IsNil)
	s.state.waitRow(c, "r1", "ready", ready(1))
	c.Check(s.env.callCount("reconcile"), gc.Equals, 1)
}

func (s *workerSuite) TestUnreadableRowIsDeleted(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Provisioner: "pool", Status: domain.StatusDeleting,
		Unreadable: []domain.UnreadableColumn{{Column: "state", Reason: "it holds a JSON array, not an object"}}})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitGone(c, "r1")
	c.Check(s.env.callCount("deprovision"), gc.Equals, 1)
	c.Check(s.env.lastInput().ID, gc.Equals, "r1")
}

func (s *workerSuite) TestUnknownProvisioner(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Provisioner: "elsewhere"})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "error", func(r *domain.Resource) bool { return r.Status == domain.StatusError })
	c.Check(row.StatusMessage, gc.Equals, `provisioner "elsewhere" is not in the provisioner set (known: pool)`)
	c.Check(row.Reason, gc.Equals, domain.ReasonBrokerError)
	c.Check(row.NextAttemptAt, gc.IsNil)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)
	s.metrics.waitOutcomes(c, 1)
	// Counted under unknown, not under the name the row gives.
	c.Check(s.metrics.reconcileObservations(), gc.DeepEquals, []reconcileObservation{
		{provisioner: metrics.Unknown, typ: domain.ResourceTypeRuntime, outcome: provisioner.OutcomePermanent},
	})
}

func (s *workerSuite) TestUnsupportedType(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Type: domain.ResourceTypeClickHouse})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "error", func(r *domain.Resource) bool { return r.Status == domain.StatusError })
	c.Check(row.StatusMessage, gc.Equals, `provisioner "pool" (fake) does not provision resources of type "clickhouse": choose a provisioner that does`)
	// The type is known (another environ type serves it): the row names the wrong
	// provisioner, which is the broker's refusal, not an unknown type.
	c.Check(row.Reason, gc.Equals, domain.ReasonBrokerError)
	c.Check(row.NextAttemptAt, gc.IsNil)
	c.Check(row.Provisioner, gc.Equals, "") // not pinned to a provisioner that cannot serve it
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)
}

func (s *workerSuite) TestNoCapacityWokenByDeprovision(c *gc.C) {
	s.state.add(domain.Resource{ID: "old", Provisioner: "pool", Status: domain.StatusReady, ObservedGeneration: 1,
		State: map[string]any{"host": "a"}})
	s.state.add(domain.Resource{ID: "new"})
	s.env.script("reconcile", fmt.Errorf("reserve 1 slot: %w", domain.ErrNoCapacity))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "new")
	row := s.state.waitRow(c, "new", "pending", func(r *domain.Resource) bool { return r.Attempts == 1 })
	s.state.waitIdle(c, "new", 1)
	due := epoch.Add(backoffBase / 2)
	c.Check(row.Status, gc.Equals, domain.StatusPending)
	c.Check(row.Reason, gc.Equals, domain.ReasonWaitingForCapacity)
	c.Check(row.WaitingSince, gc.DeepEquals, &epoch)
	c.Check(row.StatusMessage, gc.Equals, "waiting for capacity: reconcile: reserve 1 slot: no capacity")
	c.Check(row.NextAttemptAt, gc.DeepEquals, &due)
	waitReport(c, w, "waiting-for-capacity", 1)

	// Deleting another resource of the same provisioner frees room: no clock advance needed.
	s.state.requestDelete("old")
	s.watcher.send(c, "old")
	s.state.waitGone(c, "old")
	s.state.waitRow(c, "new", "ready", ready(1))
	c.Check(s.env.callCount("reconcile"), gc.Equals, 2)
	c.Check(s.metrics.waitOutcomes(c, 3), gc.DeepEquals, []string{
		provisioner.OutcomeCapacity, provisioner.OutcomeDeleted, provisioner.OutcomeReady,
	})
}

func (s *workerSuite) TestNoCapacityRetryCapped(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Status: domain.StatusPending, Attempts: 5})
	s.env.script("reconcile", domain.ErrNoCapacity)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "pending", func(r *domain.Resource) bool { return r.Attempts == 6 })
	s.state.waitIdle(c, "r1", 1)
	due := epoch.Add(capacityRetry) // backoff would be 0.5 * 5m
	c.Check(row.NextAttemptAt, gc.DeepEquals, &due)

	c.Assert(s.clock.WaitAdvance(capacityRetry, testkit.LongWait, 1), gc.IsNil)
	s.state.waitRow(c, "r1", "ready", ready(1))
}

// Retries of a resource waiting for capacity leave it pending: the row never flips to
// provisioning and back, its message changes only when the broker's reason does, and the
// time it started waiting (the row's WaitingSince) is kept for the whole wait.
func (s *workerSuite) TestCapacityRetriesStayPending(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	full := fmt.Errorf("no host has 1 free slot: %w", domain.ErrNoCapacity)
	down := fmt.Errorf("no host is up: %w", domain.ErrNoCapacity)
	s.env.script("reconcile", full, full, down)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	// rand 0.5: retries after 5s, 10s, then 20s.
	for i, delay := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second} {
		row := s.state.waitRow(c, "r1", "pending", func(r *domain.Resource) bool { return r.Attempts == i+1 })
		c.Check(row.Reason, gc.Equals, domain.ReasonWaitingForCapacity)
		c.Check(row.WaitingSince, gc.DeepEquals, &epoch, gc.Commentf("attempt %d", i+1))
		s.state.waitIdle(c, "r1", i+1)
		c.Assert(s.clock.WaitAdvance(delay, testkit.LongWait, 1), gc.IsNil)
	}
	row := s.state.waitRow(c, "r1", "ready", ready(1))
	c.Check(row.WaitingSince, gc.IsNil)

	// The first attempt's claim recorded provisioning before the broker was asked; the
	// retries, waiting for capacity, are not untouched rows and start nothing.
	c.Check(s.state.started("r1"), gc.HasLen, 1)
	updates := s.state.progress("r1")
	c.Check(statuses(updates), gc.DeepEquals, []domain.Status{
		domain.StatusPending, domain.StatusPending, domain.StatusPending,
		domain.StatusProvisioning, domain.StatusReady,
	})
	c.Check(reasons(updates), gc.DeepEquals, []domain.Reason{
		domain.ReasonWaitingForCapacity, domain.ReasonWaitingForCapacity, domain.ReasonWaitingForCapacity,
		domain.ReasonAwaitingReady, domain.ReasonAvailable,
	})
	c.Check(updates[0].StatusMessage, gc.Equals, "waiting for capacity: reconcile: no host has 1 free slot: no capacity")
	c.Check(updates[1].StatusMessage, gc.Equals, updates[0].StatusMessage)
	c.Check(updates[2].StatusMessage, gc.Equals, "waiting for capacity: reconcile: no host is up: no capacity")
	c.Check(updates[2].Attempts, gc.Equals, 3)
	c.Check(updates[2].LastError, gc.Equals, "reconcile: no host is up: no capacity")
	c.Check(updates[3].StatusMessage, gc.Equals, "provisioning generation 1: waiting for it to serve")
	c.Check(s.metrics.waitOutcomes(c, 4), gc.DeepEquals, []string{
		provisioner.OutcomeCapacity, provisioner.OutcomeCapacity, provisioner.OutcomeCapacity, provisioner.OutcomeReady,
	})
	// Only the first wait and the change of reason were worth a warning.
	c.Check(strings.Count(s.logs.String(), "reconcile failed"), gc.Equals, 2)
	c.Check(strings.Count(s.logs.String(), "still waiting for capacity"), gc.Equals, 1)
}

func (s *workerSuite) TestLeaseHeldRetriedAtExpiry(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	expires := epoch.Add(30 * time.Second)
	s.state.setLease("r1", "agent-2", expires)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitFor(c, "a claim", func() bool { return s.state.claims["r1"] == 1 })
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)
	waitReport(c, w, "next-retry-at", "2025-03-01T12:00:30Z")

	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	s.state.waitRow(c, "r1", "ready", ready(1))
	c.Check(s.state.claimCount("r1"), gc.Equals, 2)
	// Finding another agent's lease is no outcome; the ready after it is.
	c.Check(s.metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeReady})
	s.state.waitIdle(c, "r1", 2)
	c.Check(s.metrics.reconcileObservations(), gc.HasLen, 1)
}

func (s *workerSuite) TestLeaseOfLiveAgentLeftToIt(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	s.state.claimErrs = []error{&domain.LeaseHeldError{Holder: "agent-2", ExpiresAt: epoch.Add(15 * time.Second), LiveAgent: true}}
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitFor(c, "a claim", func() bool { return s.state.claims["r1"] == 1 })
	// No retry is scheduled: the other agent reconciles it, and the watcher reports it
	// again should that agent die or leave it overdue.
	waitReport(c, w, "in-flight", 0)
	c.Check(w.(interface{ Report() map[string]any }).Report()["next-retry-at"], gc.IsNil)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)

	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
	c.Check(s.state.claimCount("r1"), gc.Equals, 2)
}

// A full queue stops the loop taking events, so a backlog waits in the watcher (which
// coalesces it) rather than in the worker's memory.
func (s *workerSuite) TestFullQueueHoldsBackTheWatcher(c *gc.C) {
	s.env.gateReconcile = true
	cfg := s.config()
	cfg.Concurrency = 1
	ids := make([]string, provisioner.QueueHighWater+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%04d", i)
		s.state.add(domain.Resource{ID: ids[i]})
	}
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, ids...)
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:r0000")
	waitReport(c, w, "queue-depth", provisioner.QueueHighWater)
	select {
	case s.watcher.changes <- []watcher.Owned{{ID: "more"}}:
		c.Fatalf("the worker took an event with %d resources queued", provisioner.QueueHighWater)
	case <-time.After(shortWait):
	}

	// One starts, the queue drains below the mark, and events are taken again.
	s.env.gate.Open(c)
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:r0001")
	s.watcher.send(c, "more")
}

func (s *workerSuite) TestClaimFailureRetried(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	s.state.claimErrs = []error{errors.New("connection refused")}
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitFor(c, "a claim", func() bool { return s.state.claims["r1"] == 1 })
	waitReport(c, w, "next-retry-at", "2025-03-01T12:00:05Z")
	c.Assert(s.clock.WaitAdvance(backoffBase/2, testkit.LongWait, 1), gc.IsNil)
	s.state.waitRow(c, "r1", "ready", ready(1))
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeRetry, provisioner.OutcomeReady})
	// The failed claim read no row: neither provisioner nor type is known.
	c.Check(s.metrics.reconcileObservations()[0], gc.DeepEquals, reconcileObservation{provisioner: metrics.Unknown, outcome: provisioner.OutcomeRetry})
}

func (s *workerSuite) TestOneReconcilePerResource(c *gc.C) {
	s.env.gateReconcile = true
	s.state.add(domain.Resource{ID: "a"})
	s.state.add(domain.Resource{ID: "b"})
	cfg := s.config()
	cfg.Concurrency = 3
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "a", "b")
	entered := []string{s.env.entered.Next(c), s.env.entered.Next(c)}
	sort.Strings(entered)
	c.Check(entered, gc.DeepEquals, []string{"reconcile:a", "reconcile:b"})

	// a changes while in flight: it is marked dirty, not started again.
	s.state.updateArgs("a", map[string]any{"slots": 2})
	s.watcher.send(c, "a")
	s.env.entered.None(c, shortWait)
	waitReport(c, w, "in-flight", 2)

	s.env.gate.Open(c)
	s.env.gate.Open(c)
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:a") // generation 2, after the first ended
	s.env.gate.Open(c)
	s.state.waitRow(c, "a", "ready at generation 2", ready(2))
	s.state.waitRow(c, "b", "ready", ready(1))

	overall, perID := s.env.concurrency()
	c.Check(overall, gc.Equals, 2) // a and b ran in parallel
	c.Check(perID, gc.Equals, 1)   // never a twice at once
	// a's first attempt found its row at generation 2 when it recorded: stale.
	outcomes := s.metrics.waitOutcomes(c, 3)
	sort.Strings(outcomes)
	c.Check(outcomes, gc.DeepEquals, []string{provisioner.OutcomeReady, provisioner.OutcomeReady, provisioner.OutcomeStale})
}

func (s *workerSuite) TestConcurrencyBound(c *gc.C) {
	s.env.gateReconcile = true
	ids := []string{"r1", "r2", "r3", "r4"}
	for _, id := range ids {
		s.state.add(domain.Resource{ID: id})
	}
	cfg := s.config() // Concurrency 2, AwaitConcurrency 2
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, ids...)
	entered := []string{s.env.entered.Next(c), s.env.entered.Next(c)}
	sort.Strings(entered)
	c.Check(entered, gc.DeepEquals, []string{"reconcile:r1", "reconcile:r2"}) // first in, first out
	s.env.entered.None(c, shortWait)
	waitReport(c, w, "in-flight", 2)
	waitReport(c, w, "queue-depth", 2)
	s.metrics.waitFor(c, "queue observed as 2 queued, 2 in flight", func() bool {
		return slices.Contains(s.metrics.queues, queueObservation{depth: 2, inFlight: 2})
	})

	s.env.gate.Open(c)
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:r3")
	s.env.gate.Open(c)
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:r4")
	s.env.gate.Open(c)
	s.env.gate.Open(c)
	for _, id := range ids {
		s.state.waitRow(c, id, "ready", ready(1))
	}
	// Concurrency bounds the places. A reconcile that went on to wait for its resource to
	// serve gave its place back, so its wait may overlap the next two reconciles: the calls
	// in flight together stay within both bounds.
	c.Check(s.env.opConcurrency("reconcile"), gc.Equals, cfg.Concurrency)
	overall, _ := s.env.concurrency()
	c.Check(overall <= cfg.Concurrency+cfg.AwaitConcurrency, gc.Equals, true, gc.Commentf("%d calls in flight at once", overall))
}

// A reconcile waiting for its resource to serve gives its place back: the next resource is
// applied meanwhile, and AwaitConcurrency bounds the waits beside the places.
func (s *workerSuite) TestAwaitingGivesThePlaceBack(c *gc.C) {
	s.env.gateAwait = true
	ids := []string{"r1", "r2", "r3"}
	for _, id := range ids {
		s.state.add(domain.Resource{ID: id})
	}
	cfg := s.config()
	cfg.Concurrency, cfg.AwaitConcurrency = 1, 1
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, ids...)
	// r1 waits: its place goes to r2, which waits too (it may reach its wait first). Two in
	// flight is the one place and the one wait beside it: r3 must wait for one to end.
	entered := []string{s.env.entered.Next(c), s.env.entered.Next(c)}
	sort.Strings(entered)
	c.Check(entered, gc.DeepEquals, []string{"await:r1", "await:r2"})
	s.env.entered.None(c, shortWait)
	waitReport(c, w, "in-flight", 2)
	waitReport(c, w, "awaiting-ready", 2)
	row, _ := s.state.get("r1")
	c.Check(row.StatusMessage, gc.Equals, "provisioning generation 1: waiting for it to serve")
	c.Check(s.state.leased("r1"), gc.Equals, true) // the wait keeps the lease

	s.env.gate.Open(c)
	c.Check(s.env.entered.Next(c), gc.Equals, "await:r3")
	s.env.gate.Open(c)
	s.env.gate.Open(c)
	for _, id := range ids {
		s.state.waitRow(c, id, "ready", ready(1))
	}
	c.Check(s.env.callCount("reconcile"), gc.Equals, 3)
}

func (s *workerSuite) TestStaleRequeuedAndConverges(c *gc.C) {
	s.env.gateReconcile = true
	s.state.add(domain.Resource{ID: "r1", Args: map[string]any{"slots": 1}})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:r1")
	// The args change under the attempt and no watcher event follows: recording the
	// broker's state gives ErrStale, which alone brings the worker back.
	s.state.updateArgs("r1", map[string]any{"slots": 2})
	s.env.gate.Open(c)
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:r1")
	c.Check(s.env.lastOpts().Generation, gc.Equals, int64(2))
	s.env.gate.Open(c)
	s.state.waitRow(c, "r1", "ready at generation 2", ready(2))
	c.Check(s.env.callCount("await"), gc.Equals, 1)
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeStale, provisioner.OutcomeReady})
}

func (s *workerSuite) TestDeleteDuringProvisioning(c *gc.C) {
	s.env.gateReconcile = true
	s.state.add(domain.Resource{ID: "r1"})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:r1")
	s.state.requestDelete("r1")
	s.env.gate.Open(c)
	s.state.waitGone(c, "r1")
	c.Check(s.env.callCount("deprovision"), gc.Equals, 1)
	c.Check(s.env.callCount("await"), gc.Equals, 0)
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeStale, provisioner.OutcomeDeleted})
}

func (s *workerSuite) TestPersistedRetryHonouredAfterRestart(c *gc.C) {
	next := epoch.Add(time.Minute)
	// As a previous agent left them: a transient failure and a wait for capacity.
	s.state.add(domain.Resource{ID: "r1", Provisioner: "pool", Status: domain.StatusProvisioning,
		Attempts: 2, NextAttemptAt: &next, LastError: "host busy"})
	s.state.add(domain.Resource{ID: "r2", Provisioner: "pool", Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity,
		StatusMessage: "waiting for capacity: no capacity", StateTimes: domain.StateTimes{WaitingSince: &epoch},
		Attempts: 1, NextAttemptAt: &next, LastError: "no capacity"})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1", "r2") // the watcher's initial event
	s.state.waitIdle(c, "r1", 1)
	s.state.waitIdle(c, "r2", 1)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)
	waitReport(c, w, "scheduled-retries", 2)
	waitReport(c, w, "waiting-for-capacity", 1)
	waitReport(c, w, "next-retry-at", "2025-03-01T12:01:00Z")

	c.Check(s.metrics.reconcileObservations(), gc.HasLen, 0) // retries not due are no outcome

	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	s.state.waitRow(c, "r1", "ready", ready(1))
	s.state.waitRow(c, "r2", "ready", ready(1))
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeReady, provisioner.OutcomeReady})
}

func (s *workerSuite) TestKillDuringReconcileHandsTheResourceOver(c *gc.C) {
	s.env.gateReconcile = true
	s.state.add(domain.Resource{ID: "r1"})
	w := s.start(c, s.config())

	s.watcher.send(c, "r1")
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:r1")
	workertest.CleanKill(c, w)

	// The others found the lease held: the hand-over logs a change for them.
	c.Check(s.state.handOverCount("r1"), gc.Equals, 1)
	c.Check(s.state.releaseCallCount("r1"), gc.Equals, 0)
	c.Check(s.state.leased("r1"), gc.Equals, false)
}

func (s *workerSuite) TestKillDuringReconcile(c *gc.C) {
	s.env.gateReconcile = true
	s.state.add(domain.Resource{ID: "r1"})
	w := s.start(c, s.config())

	s.watcher.send(c, "r1")
	c.Check(s.env.entered.Next(c), gc.Equals, "reconcile:r1")
	workertest.CleanKill(c, w)

	c.Check(s.state.leased("r1"), gc.Equals, false) // released on the way out
	row, _ := s.state.get("r1")
	c.Check(row.Status, gc.Equals, domain.StatusProvisioning)
	c.Check(row.Attempts, gc.Equals, 0) // a kill is no failure
	c.Check(row.LastError, gc.Equals, "")
	workertest.CheckKilled(c, s.watcher)
	c.Check(s.metrics.reconcileObservations(), gc.HasLen, 0) // nor an outcome
}

func (s *workerSuite) TestReconcileTimeout(c *gc.C) {
	s.env.gateAwait = true
	s.state.add(domain.Resource{ID: "r1"})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	c.Check(s.env.entered.Next(c), gc.Equals, "await:r1")
	c.Assert(s.clock.WaitAdvance(reconcileTimeout, testkit.LongWait, 1), gc.IsNil)
	row := s.state.waitRow(c, "r1", "failure", func(r *domain.Resource) bool { return r.Attempts == 1 })
	c.Check(row.Status, gc.Equals, domain.StatusProvisioning)
	c.Check(row.LastError, gc.Equals, "await ready: context canceled (timed out after 5m0s)")
	c.Check(row.State, gc.DeepEquals, map[string]any{"generation": int64(1)}) // kept for the next attempt
	s.metrics.waitOutcomes(c, 1)
	c.Check(s.metrics.reconcileObservations(), gc.DeepEquals, []reconcileObservation{
		{provisioner: "pool", typ: domain.ResourceTypeRuntime, outcome: provisioner.OutcomeRetry, d: reconcileTimeout}, // on the worker's clock
	})
}

func (s *workerSuite) TestWatcherFailureStopsWorker(c *gc.C) {
	w := s.start(c, s.config())
	s.watcher.fail(errors.New("change log unreadable"))
	c.Check(workertest.CheckKilled(c, w), gc.ErrorMatches, "change log unreadable")
}

func (s *workerSuite) TestWatcherStartFailure(c *gc.C) {
	cfg := s.config()
	cfg.NewWatcher = func() (provisioner.Watcher, error) { return nil, errors.New("no database") }
	w := s.start(c, cfg)
	c.Check(workertest.CheckKilled(c, w), gc.ErrorMatches, "start resources watcher: no database")
}

func (s *workerSuite) TestNoSecretsInLogsOrMessages(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Args: map[string]any{"version": "secret-arg-value"}})
	s.env.script("reconcile", errors.New("busy"))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitIdle(c, "r1", 1)
	c.Assert(s.clock.WaitAdvance(backoffBase/2, testkit.LongWait, 1), gc.IsNil)
	s.state.waitRow(c, "r1", "ready", ready(1))
	s.state.waitIdle(c, "r1", 2)
	// The attempt's outcome is counted after its last log line: once both are counted, the
	// log is complete.
	s.metrics.waitOutcomes(c, 2)

	logs := s.logs.String()
	c.Check(logs, gc.Not(gc.Matches), "(?s).*secret-arg-value.*")
	c.Check(logs, gc.Not(gc.Matches), "(?s).*host-r1.*") // client config
	c.Check(logs, gc.Matches, `(?s).*msg=ready id=r1 provisioner=pool type=runtime generation=1.*`)
	for _, u := range s.state.progress("r1") {
		c.Check(u.StatusMessage, gc.Not(gc.Matches), ".*secret-arg-value.*")
	}
}

// A worker config has its dependencies and valid Settings; whatever is wrong is NotValid and
// named.
func (s *workerSuite) TestValidate(c *gc.C) {
	for i, t := range []struct {
		change func(*provisioner.Config)
		field  string
	}{
		{func(cfg *provisioner.Config) { cfg.State = nil }, "State"},
		{func(cfg *provisioner.Config) { cfg.Environs = nil }, "Environs"},
		{func(cfg *provisioner.Config) { cfg.NewWatcher = nil }, "NewWatcher"},
		{func(cfg *provisioner.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *provisioner.Config) { cfg.Rand = nil }, "Rand"},
		{func(cfg *provisioner.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *provisioner.Config) { cfg.Metrics = nil }, "Metrics"},
		{func(cfg *provisioner.Config) { cfg.Agent.ID = "" }, "agent ID .*--agent-id"},
		{func(cfg *provisioner.Config) { cfg.Concurrency = 0 }, "Concurrency 0 .*at least 1"},
		{func(cfg *provisioner.Config) { cfg.ReconcileTimeout = 0 }, "ReconcileTimeout 0s .*positive"},
		{func(cfg *provisioner.Config) { cfg.LeaseTTL = reconcileTimeout }, `LeaseTTL 5m0s \(must exceed ReconcileTimeout 5m0s.*raise LeaseTTL`},
		{func(cfg *provisioner.Config) { cfg.BackoffBase = 0 }, "BackoffBase 0s .*positive"},
		{func(cfg *provisioner.Config) { cfg.BackoffMax = time.Second }, `BackoffMax 1s \(must be at least BackoffBase 10s\)`},
		{func(cfg *provisioner.Config) { cfg.CapacityRetry = 0 }, "CapacityRetry 0s .*positive"},
	} {
		c.Logf("test %d: %s", i, t.field)
		cfg := s.config()
		t.change(&cfg)
		testkit.CheckNotValid(c, cfg.Validate(), t.field)
		w, err := provisioner.NewWorker(cfg)
		c.Check(w, gc.IsNil)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.config().Validate(), gc.IsNil)
}

// waitReport waits until the worker's report shows want under key. The report has no
// change notification, so this polls.
func waitReport(c *gc.C, w worker.Worker, key string, want any) {
	reporter := w.(interface{ Report() map[string]any })
	testkit.Eventually(c, func() error {
		if got := reporter.Report()[key]; got != want {
			return fmt.Errorf("report %s: got %v, want %v", key, got, want)
		}
		return nil
	})
}

// syncBuffer is a bytes.Buffer safe for the worker's goroutines to log into.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
