package provisioner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/domain/postgres/postgrestest"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/provisioner"
)

// postgresSuite runs the worker on a real database, whose triggers write each resource's
// history, and a static pool of one one-slot host.
type postgresSuite struct {
	ctx     context.Context
	cancel  context.CancelFunc
	cleanup func() // closes state and drops its database
	state   *postgres.State
	clock   *testclock.Clock
	set     *environ.Set
}

var _ = gc.Suite(&postgresSuite{})

const poolHost = "http://runtime-a.test:9091"

func (s *postgresSuite) SetUpTest(c *gc.C) {
	s.ctx, s.cancel = context.WithTimeout(context.Background(), time.Minute)
	var err error
	s.state, s.cleanup, err = postgrestest.New(s.ctx)
	c.Assert(err, gc.IsNil)
	s.clock = testclock.NewClock(time.Now().Truncate(time.Second))
	spec, err := json.Marshal(map[string]any{
		"runtimes":    []map[string]any{{"host": poolHost, "slots": 1}},
		"health_path": "", // the host is not probed: its slot alone decides
	})
	c.Assert(err, gc.IsNil)
	env, err := static.New("pool", spec, environ.Deps{Slots: s.state, Resources: s.state, Clock: s.clock})
	c.Assert(err, gc.IsNil)
	s.set = &environ.Set{Default: "pool", Environs: map[string]environ.Environ{"pool": env}, Catalog: shippedCatalog()}
}

func (s *postgresSuite) TearDownTest(c *gc.C) {
	if s.cleanup != nil {
		s.cleanup()
	}
	s.cancel()
}

func (s *postgresSuite) create(c *gc.C, name string) domain.Resource {
	r, err := s.state.CreateResource(s.ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "acme",
		Provisioner: "pool", Args: map[string]any{"slots": 1}})
	c.Assert(err, gc.IsNil)
	return r
}

// advanceToRetry brings the resource's next attempt: the database's clock does not move with
// the test's, so the retry is made due on it directly, and the test clock moves on by the
// wait the worker scheduled (the row's retry is that long after its write).
func (s *postgresSuite) advanceToRetry(c *gc.C, id string) {
	r, err := s.state.GetResource(s.ctx, id)
	c.Assert(err, gc.IsNil)
	c.Assert(r.NextAttemptAt, gc.NotNil, gc.Commentf("no retry scheduled: %s %q", r.Status, r.StatusMessage))
	_, err = s.state.Pool().Exec(s.ctx, `UPDATE resources SET next_attempt_at = now() WHERE id = $1`, id)
	c.Assert(err, gc.IsNil)
	c.Assert(s.clock.WaitAdvance(max(r.NextAttemptAt.Sub(r.UpdatedAt), 0), testkit.LongWait, 1), gc.IsNil)
}

// fillPool creates a resource holding the pool's one slot and returns it.
func (s *postgresSuite) fillPool(c *gc.C) domain.Resource {
	occupant := s.create(c, "occupant")
	_, err := s.state.ReserveSlots(s.ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: occupant.ID, Owner: "acme", Slots: 1, HostSlots: func(string) int { return math.MaxInt32 }},
		func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
			return poolHost, nil
		})
	c.Assert(err, gc.IsNil)
	return occupant
}

// startWorker starts the provisioner on the suite's database, pool and clock, reporting to
// metrics and taking its work from watcher.
func (s *postgresSuite) startWorker(c *gc.C, metrics *fakeMetrics, watcher *fakeWatcher) worker.Worker {
	return s.startWorkerOn(c, s.state, metrics, watcher)
}

// startWorkerOn is startWorker with the worker's store calls going through state.
func (s *postgresSuite) startWorkerOn(c *gc.C, state provisioner.ResourceState, metrics *fakeMetrics, watcher *fakeWatcher) worker.Worker {
	w, err := provisioner.NewWorker(provisioner.Config{
		State:      state,
		Environs:   s.set,
		NewWatcher: func() (provisioner.Watcher, error) { return watcher, nil },
		Clock:      s.clock,
		Rand:       func() float64 { return 0.5 },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:    metrics,
		Locks:      new(resourcelock.Set),
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
	})
	c.Assert(err, gc.IsNil)
	return w
}

type eventLine struct {
	kind    domain.EventKind
	status  domain.Status
	message string
}

func (s *postgresSuite) events(c *gc.C, id string) []eventLine {
	events, err := s.state.ListEvents(s.ctx, id, 0)
	c.Assert(err, gc.IsNil)
	out := make([]eventLine, len(events))
	for i, e := range events {
		out[i] = eventLine{e.Kind, e.Status, e.Message}
	}
	return out
}

// A resource waiting for a full pool is retried again and again; its history holds one
// event for the whole wait, its row keeps the time the wait began, and it goes to ready
// once the slot is freed.
func (s *postgresSuite) TestCapacityRetriesLeaveOneEvent(c *gc.C) {
	occupant := s.fillPool(c)
	waiter := s.create(c, "waiter")

	metrics := newFakeMetrics()
	watcher := newFakeWatcher()
	w := s.startWorker(c, metrics, watcher)
	defer workertest.CleanKill(c, w)

	watcher.send(c, waiter.ID)
	metrics.waitOutcomes(c, 1)
	first, err := s.state.GetResource(s.ctx, waiter.ID)
	c.Assert(err, gc.IsNil)
	c.Assert(first.WaitingSince, gc.NotNil, gc.Commentf("%s/%s %q", first.Status, first.Reason, first.StatusMessage))
	const retries = 5
	for i := 1; i <= retries; i++ {
		s.advanceToRetry(c, waiter.ID)
		metrics.waitOutcomes(c, i+1)
	}

	waiting := fmt.Sprintf(`waiting for capacity: reconcile: place runtime: reserve 1 slots of pool for resource %s: `+
		`no host of provisioner "pool" has 1 free slot (largest free: 0 on %s)`,
		waiter.ID, poolHost)
	row, err := s.state.GetResource(s.ctx, waiter.ID)
	c.Assert(err, gc.IsNil)
	c.Check(row.Status, gc.Equals, domain.StatusPending)
	c.Check(row.Reason, gc.Equals, domain.ReasonWaitingForCapacity)
	c.Check(row.WaitingSince, gc.DeepEquals, first.WaitingSince) // since the first failure, all along
	c.Check(row.StatusMessage, gc.Equals, waiting)
	c.Check(row.Attempts, gc.Equals, retries+1)
	history := []eventLine{
		{domain.EventStatus, domain.StatusPending, "created"},
		{domain.EventStatus, domain.StatusProvisioning, "provisioning generation 1"},
		{domain.EventError, domain.StatusPending, waiting}, // the only event of the whole wait
	}
	c.Check(s.events(c, waiter.ID), gc.DeepEquals, history)
	waitingRows, err := s.state.ListWaitingForCapacity(s.ctx, 0)
	c.Assert(err, gc.IsNil)
	c.Assert(waitingRows, gc.HasLen, 1)
	c.Check(waitingRows[0].ID, gc.Equals, waiter.ID)

	c.Assert(s.state.ReleaseSlots(s.ctx, "pool", occupant.ID, nil), gc.IsNil)
	s.advanceToRetry(c, waiter.ID)
	c.Check(metrics.waitOutcomes(c, retries+2)[retries+1], gc.Equals, provisioner.OutcomeReady)
	c.Check(s.events(c, waiter.ID), gc.DeepEquals, append(history,
		eventLine{domain.EventStatus, domain.StatusProvisioning, "provisioning generation 1: waiting for it to serve"},
		eventLine{domain.EventStatus, domain.StatusReady, "ready at generation 1"},
	))
}

// An agent whose clock is ten minutes ahead of the database's schedules its retries on the
// database's clock: the stored next attempt is the backoff after the write, as every agent
// reads it, not the backoff after the agent's own time.
func (s *postgresSuite) TestRetriesAreScheduledOnTheDatabaseClock(c *gc.C) {
	s.clock.Advance(10 * time.Minute)
	s.fillPool(c)
	waiter := s.create(c, "waiter")
	metrics := newFakeMetrics()
	watcher := newFakeWatcher()
	w := s.startWorker(c, metrics, watcher)
	defer workertest.CleanKill(c, w)

	watcher.send(c, waiter.ID)
	c.Check(metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeCapacity})
	row, err := s.state.GetResource(s.ctx, waiter.ID)
	c.Assert(err, gc.IsNil)
	c.Assert(row.NextAttemptAt, gc.NotNil)
	wait := row.NextAttemptAt.Sub(row.UpdatedAt)
	c.Check(wait > 0 && wait <= capacityRetry, gc.Equals, true, gc.Commentf("retry %s after the write", wait))
	c.Check(row.NextAttemptAt.Before(s.clock.Now()), gc.Equals, true,
		gc.Commentf("next attempt %v is on the agent's clock (%v), not the database's", row.NextAttemptAt, s.clock.Now()))
}

// A retry another agent scheduled five minutes ahead on the database's clock is not taken
// early by an agent whose clock is ten minutes ahead: it claims the resource, finds the
// retry not due on the database's clock and leaves it as it is.
func (s *postgresSuite) TestPeersBackoffHoldsOnAnAgentAhead(c *gc.C) {
	s.clock.Advance(10 * time.Minute)
	r := s.create(c, "retried")
	_, err := s.state.Pool().Exec(s.ctx, `
		UPDATE resources SET status = 'provisioning', status_message = 'attempt 1 failed: boom; retrying',
		       attempts = 1, last_error = 'boom', next_attempt_at = now() + interval '5 minutes'
		 WHERE id = $1`, r.ID)
	c.Assert(err, gc.IsNil)
	before, err := s.state.GetResource(s.ctx, r.ID)
	c.Assert(err, gc.IsNil)
	history := s.events(c, r.ID)
	watcher := newFakeWatcher()
	w := s.startWorker(c, newFakeMetrics(), watcher)
	defer workertest.CleanKill(c, w)
	watcher.send(c, r.ID)
	// The attempt ends by giving up the lease it claimed.
	var after domain.Resource
	testkit.Eventually(c, func() error {
		after, err = s.state.GetResource(s.ctx, r.ID)
		if err != nil {
			return err
		}
		if after.LeaseToken == before.LeaseToken || after.LeaseHolder != "" {
			return fmt.Errorf("lease %q (claim %d): not claimed and released yet", after.LeaseHolder, after.LeaseToken)
		}
		return nil
	})
	c.Check(after.Status, gc.Equals, domain.StatusProvisioning)
	c.Check(after.Attempts, gc.Equals, 1)
	c.Check(after.NextAttemptAt, gc.DeepEquals, before.NextAttemptAt)
	c.Check(s.events(c, r.ID), gc.DeepEquals, history)
}

// countingState is the suite's real store, counting the claims and progress records the
// worker makes through it.
type countingState struct {
	*postgres.State
	mu      sync.Mutex
	claims  int
	records int
	reads   int
}

func (s *countingState) GetResource(ctx context.Context, id string) (domain.Resource, error) {
	s.count(&s.reads)
	return s.State.GetResource(ctx, id)
}

func (s *countingState) ClaimResource(ctx context.Context, id, holder string, ttl time.Duration) (domain.Claim, error) {
	s.count(&s.claims)
	return s.State.ClaimResource(ctx, id, holder, ttl)
}

func (s *countingState) ClaimAndStart(ctx context.Context, id, holder string, ttl time.Duration, start domain.ProvisioningStart) (domain.Claim, error) {
	s.count(&s.claims)
	return s.State.ClaimAndStart(ctx, id, holder, ttl, start)
}

func (s *countingState) RecordProgress(ctx context.Context, id string, lease domain.Lease, u domain.ProgressUpdate) (domain.Resource, error) {
	s.count(&s.records)
	return s.State.RecordProgress(ctx, id, lease, u)
}

func (s *countingState) count(n *int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*n++
}

func (s *countingState) counts() (claims, records int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims, s.records
}

// reconcileCounting runs the worker on the suite's store through a countingState until it
// reconciled resource id to ready once, and returns the claims and records it made.
func (s *postgresSuite) reconcileCounting(c *gc.C, id string) (claims, records int) {
	counting, metrics, w := s.startCounting(c, id)
	defer workertest.CleanKill(c, w)
	c.Check(metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeReady})
	return counting.counts()
}

// startCounting starts the worker on the suite's store through a countingState and has it
// reconcile resource id; the caller kills it.
func (s *postgresSuite) startCounting(c *gc.C, id string) (*countingState, *fakeMetrics, worker.Worker) {
	counting := &countingState{State: s.state}
	metrics := newFakeMetrics()
	watcher := newFakeWatcher()
	w := s.startWorkerOn(c, counting, metrics, watcher)
	watcher.send(c, id)
	return counting, metrics, w
}

// keepChangedRows has the suite's store read the rows of the change log's entries with
// them, as it does for an agent that keeps up with its changes and provisions in one
// transaction: a row was asked for, then the entries are read in a small read.
func (s *postgresSuite) keepChangedRows(c *gc.C) {
	_, ok := s.state.ChangedResource("00000000-0000-0000-0000-000000000000")
	c.Assert(ok, gc.Equals, false)
	_, err := s.state.ChangesAfter(s.ctx, 0, 1000)
	c.Assert(err, gc.IsNil)
}

// A runtime whose row the store read with its change is provisioned in one transaction
// without reading the row again: ready, with the same history.
func (s *postgresSuite) TestAChangedRowReadWithItsChangeIsNotReadAgain(c *gc.C) {
	s.keepChangedRows(c)
	r := s.create(c, "changed")
	_, err := s.state.ChangesAfter(s.ctx, 0, 1000)
	c.Assert(err, gc.IsNil)
	counting, metrics, w := s.startCounting(c, r.ID)
	defer workertest.CleanKill(c, w)
	c.Check(metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeReady})
	counting.mu.Lock()
	c.Check(counting.reads, gc.Equals, 0)
	c.Check(counting.claims, gc.Equals, 0)
	counting.mu.Unlock()
	c.Check(s.events(c, r.ID), gc.DeepEquals, provisionedHistory)
}

// A row read with its change that a client paused since is not provisioned on what the read
// said: the transaction finds it changed, and the attempt reads it again and leaves it
// paused.
func (s *postgresSuite) TestAChangedRowChangedSinceIsReadAgain(c *gc.C) {
	s.keepChangedRows(c)
	r := s.create(c, "paused-since")
	_, err := s.state.ChangesAfter(s.ctx, 0, 1000)
	c.Assert(err, gc.IsNil)
	_, err = s.state.Pool().Exec(s.ctx, `UPDATE resources SET paused = true WHERE id = $1`, r.ID)
	c.Assert(err, gc.IsNil)
	counting, _, w := s.startCounting(c, r.ID)
	defer workertest.CleanKill(c, w)
	// The claim's release is how the agent shows it took the change up and left the row
	// paused.
	var row domain.Resource
	for deadline := time.Now().Add(testkit.LongWait); ; time.Sleep(10 * time.Millisecond) {
		claims, _ := counting.counts()
		row, err = s.state.GetResource(s.ctx, r.ID)
		c.Assert(err, gc.IsNil)
		if claims > 0 && row.LeaseHolder == "" {
			break
		}
		if time.Now().After(deadline) {
			c.Fatalf("the paused row was never claimed and released: %+v", row)
		}
	}
	c.Check(row.Status, gc.Equals, domain.StatusPending)
	c.Check(row.Paused, gc.Equals, true)
	counting.mu.Lock()
	c.Check(counting.reads > 0, gc.Equals, true)
	counting.mu.Unlock()
	var reserved int
	c.Assert(s.state.Pool().QueryRow(s.ctx, `SELECT count(*) FROM slot_reservations WHERE resource_id = $1`, r.ID).Scan(&reserved), gc.IsNil)
	c.Check(reserved, gc.Equals, 0)
}

// provisionedHistory is the history of a runtime provisioned to ready at generation 1.
var provisionedHistory = []eventLine{
	{domain.EventStatus, domain.StatusPending, "created"},
	{domain.EventStatus, domain.StatusProvisioning, "provisioning generation 1"},
	{domain.EventStatus, domain.StatusProvisioning, "provisioning generation 1: waiting for it to serve"},
	{domain.EventStatus, domain.StatusReady, "ready at generation 1"},
}

// A runtime nothing has been done to yet is provisioned on the static pool in one
// transaction: no claim, no lease, no record of its own, and the same history, ready and
// admitted as the usual way leaves it.
func (s *postgresSuite) TestAnUntouchedRuntimeIsProvisionedInOneTransaction(c *gc.C) {
	r := s.create(c, "instant")
	claims, records := s.reconcileCounting(c, r.ID)
	c.Check(claims, gc.Equals, 0)
	c.Check(records, gc.Equals, 0)
	row, err := s.state.GetResource(s.ctx, r.ID)
	c.Assert(err, gc.IsNil)
	c.Check(row.Status, gc.Equals, domain.StatusReady)
	c.Check(row.ObservedGeneration, gc.Equals, int64(1))
	c.Check(row.LeaseHolder, gc.Equals, "")
	c.Check(row.State["host"], gc.Equals, poolHost)
	c.Check(s.events(c, r.ID), gc.DeepEquals, provisionedHistory)
	var provisionerName string
	var units int64
	c.Assert(s.state.Pool().QueryRow(s.ctx, `SELECT admitted_provisioner, admitted_units FROM resources WHERE id = $1`, r.ID).
		Scan(&provisionerName, &units), gc.IsNil)
	c.Check(provisionerName, gc.Equals, "pool")
	c.Check(units, gc.Equals, int64(1))
}

// A runtime whose owner has a quota is provisioned the usual way, claimed and admitted
// against the quota, with the same history.
func (s *postgresSuite) TestARuntimeUnderAQuotaIsProvisionedTheUsualWay(c *gc.C) {
	r := s.create(c, "quota")
	limit := int64(5)
	_, err := s.state.SetQuota(s.ctx, domain.QuotaChange{Owner: "acme", Provisioner: "pool", Resources: domain.QuotaLimit{Set: true, Max: &limit}})
	c.Assert(err, gc.IsNil)
	claims, records := s.reconcileCounting(c, r.ID)
	c.Check(claims, gc.Equals, 1)
	c.Check(records, gc.Equals, 1)
	c.Check(s.events(c, r.ID), gc.DeepEquals, provisionedHistory)
}
