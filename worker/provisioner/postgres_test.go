package provisioner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/juju/clock/testclock"
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
	s.set = &environ.Set{Default: "pool", Environs: map[string]environ.Environ{"pool": env}}
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

// advanceToRetry moves the clock to the resource's next attempt.
func (s *postgresSuite) advanceToRetry(c *gc.C, id string) {
	r, err := s.state.GetResource(s.ctx, id)
	c.Assert(err, gc.IsNil)
	c.Assert(r.NextAttemptAt, gc.NotNil, gc.Commentf("no retry scheduled: %s %q", r.Status, r.StatusMessage))
	c.Assert(s.clock.WaitAdvance(max(r.NextAttemptAt.Sub(s.clock.Now()), 0), testkit.LongWait, 1), gc.IsNil)
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
// event for the whole wait, and it goes to ready once the slot is freed.
func (s *postgresSuite) TestCapacityRetriesLeaveOneEvent(c *gc.C) {
	occupant := s.create(c, "occupant")
	_, err := s.state.ReserveSlots(s.ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: occupant.ID, Owner: "acme", Slots: 1},
		func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
			return poolHost, nil
		})
	c.Assert(err, gc.IsNil)
	waiter := s.create(c, "waiter")
	started := s.clock.Now()

	metrics := newFakeMetrics()
	watcher := newFakeWatcher()
	w, err := provisioner.NewWorker(provisioner.Config{
		State:      s.state,
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
		},
	})
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)

	watcher.send(c, waiter.ID)
	metrics.waitOutcomes(c, 1)
	const retries = 5
	for i := 1; i <= retries; i++ {
		s.advanceToRetry(c, waiter.ID)
		metrics.waitOutcomes(c, i+1)
	}

	waiting := fmt.Sprintf(`waiting for capacity since %s: reconcile: place runtime: reserve 1 slots of pool for resource %s: `+
		`no host of provisioner "pool" has 1 free slot (largest free: 0 on %s)`,
		started.UTC().Format(time.RFC3339), waiter.ID, poolHost)
	row, err := s.state.GetResource(s.ctx, waiter.ID)
	c.Assert(err, gc.IsNil)
	c.Check(row.Status, gc.Equals, domain.StatusPending)
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
