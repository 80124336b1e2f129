package provisioner_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/worker/provisioner"
)

// fitSuite runs the worker on each real store with a static pool of one host: what does
// not fit, now or ever, on a pool whose size the test chooses.
type fitSuite struct{}

var _ = gc.Suite(&fitSuite{})

// fitStore is a real store, a static pool of one host of slots slots on it, and a worker
// reconciling on both.
type fitStore struct {
	typeStore
	set     *environ.Set
	metrics *fakeMetrics
	watcher *fakeWatcher
	worker  worker.Worker
}

// pool is a provisioner set of one static pool, "pool", of one host with slots slots, on st.
func pool(c *gc.C, st domain.State, slots int) *environ.Set {
	spec, err := json.Marshal(map[string]any{
		"runtimes":    []map[string]any{{"host": poolHost, "slots": slots}},
		"health_path": "", // the host is not probed: its slots alone decide
	})
	c.Assert(err, gc.IsNil)
	env, err := static.New("pool", spec, environ.Deps{Slots: st, Resources: st, Clock: testclock.NewClock(time.Now())})
	c.Assert(err, gc.IsNil)
	return &environ.Set{Default: "pool", Environs: map[string]environ.Environ{"pool": env}, Catalog: shippedCatalog()}
}

// start runs a provisioner worker on f's store and set, as the agent does after each change
// of its provisioner set.
func (f *fitStore) start(c *gc.C) {
	f.metrics, f.watcher = newFakeMetrics(), newFakeWatcher()
	w, err := provisioner.NewWorker(provisioner.Config{
		State:      f.State,
		Environs:   f.set,
		NewWatcher: func() (provisioner.Watcher, error) { return f.watcher, nil },
		Clock:      testclock.NewClock(time.Now()),
		Rand:       func() float64 { return 0.5 },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:    f.metrics,
		Locks:      new(resourcelock.Set),
		Settings: provisioner.Settings{
			Agent:            domain.AgentIdentity{ID: holder, TTL: 15 * time.Second},
			Concurrency:      1,
			AwaitConcurrency: 1,
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
	f.worker = w
}

func (f *fitStore) create(c *gc.C, ctx context.Context, name string, slots int) domain.Resource {
	r, err := f.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "acme",
		Provisioner: "pool", Args: map[string]any{"slots": slots}})
	c.Assert(err, gc.IsNil)
	return r
}

// reconcile hands id to the worker and waits for its n-th outcome since the worker started.
func (f *fitStore) reconcile(c *gc.C, id string, n int) string {
	f.watcher.send(c, id)
	return f.metrics.waitOutcomes(c, n)[n-1]
}

func (f *fitStore) get(c *gc.C, ctx context.Context, id string) domain.Resource {
	r, err := f.GetResource(ctx, id)
	c.Assert(err, gc.IsNil)
	return r
}

// eachFitStore runs test on each real store, with a worker on a pool of one host of slots.
func eachFitStore(c *gc.C, slots int, test func(ctx context.Context, f *fitStore)) {
	for name, open := range typeStores {
		c.Logf("store %s", name)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		st, closeStore := open(c, ctx)
		f := &fitStore{typeStore: st, set: pool(c, st.State, slots)}
		f.start(c)
		test(ctx, f)
		workertest.CleanKill(c, f.worker)
		closeStore()
		cancel()
	}
}

// A resize the pool has too little room for leaves the runtime serving: ready, at its
// observed generation, with reason ResizeWaitingForCapacity and the time the wait began,
// kept across its retries. When room frees, the resize goes through.
func (*fitSuite) TestResizeWithoutRoomStaysReady(c *gc.C) {
	eachFitStore(c, 3, func(ctx context.Context, f *fitStore) {
		occupant := f.create(c, ctx, "occupant", 2)
		c.Assert(f.reconcile(c, occupant.ID, 1), gc.Equals, provisioner.OutcomeReady)
		r := f.create(c, ctx, "resized", 1)
		c.Assert(f.reconcile(c, r.ID, 2), gc.Equals, provisioner.OutcomeReady)

		_, err := f.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2})
		c.Assert(err, gc.IsNil)
		c.Assert(f.reconcile(c, r.ID, 3), gc.Equals, provisioner.OutcomeCapacity)
		first := f.get(c, ctx, r.ID)
		c.Check(first.Status, gc.Equals, domain.StatusReady)
		c.Check(first.Reason, gc.Equals, domain.ReasonResizeWaitingForCapacity)
		c.Check(first.Generation, gc.Equals, int64(2))
		c.Check(first.ObservedGeneration, gc.Equals, int64(1))
		c.Check(first.WaitingSince, gc.NotNil)
		c.Check(first.NextAttemptAt, gc.NotNil)
		c.Check(first.StatusMessage, gc.Matches, `serving generation 1 while generation 2 waits for capacity: .*host `+poolHost+` has 0 free slots; resize from 1 to 2 slots needs 1.*`)
		c.Check(first.State["slots"], gc.Equals, float64(1)) // the runtime keeps its size
		conditions := domain.Conditions(first)
		c.Check(conditions[0].Status, gc.Equals, domain.ConditionTrue)
		c.Check(conditions[1].Status, gc.Equals, domain.ConditionFalse)
		c.Check(conditions[1].Reason, gc.Equals, string(domain.ReasonResizeWaitingForCapacity))

		// A retry (made due at once) keeps the row ready and the time the wait began.
		c.Assert(f.exec(ctx, `UPDATE resources SET next_attempt_at = NULL WHERE id = $1`, r.ID), gc.IsNil)
		c.Assert(f.reconcile(c, r.ID, 4), gc.Equals, provisioner.OutcomeCapacity)
		again := f.get(c, ctx, r.ID)
		c.Check(again.Status, gc.Equals, domain.StatusReady)
		c.Check(again.Reason, gc.Equals, domain.ReasonResizeWaitingForCapacity)
		c.Check(again.Attempts, gc.Equals, 2)
		c.Check(again.WaitingSince, gc.DeepEquals, first.WaitingSince)

		// Deleting the occupant frees its slots; the worker wakes the resize at once.
		_, err = f.RequestDelete(ctx, occupant.ID)
		c.Assert(err, gc.IsNil)
		f.watcher.send(c, occupant.ID)
		c.Check(f.metrics.waitOutcomes(c, 6)[4:], gc.DeepEquals, []string{provisioner.OutcomeDeleted, provisioner.OutcomeReady})
		done := f.get(c, ctx, r.ID)
		c.Check(done.Status, gc.Equals, domain.StatusReady)
		c.Check(done.Reason, gc.Equals, domain.ReasonAvailable)
		c.Check(done.ObservedGeneration, gc.Equals, int64(2))
		c.Check(done.WaitingSince, gc.IsNil)
		c.Check(done.State["slots"], gc.Equals, float64(2))
	})
}

// A runtime larger than the pool's one host fails for good, naming the largest size, and
// waits for nothing. Raising the host's slots changes the provisioner's spec: recording it
// (as the agent does when its provisioner set changes) moves the pool's resources to a new
// generation with their failures cleared, and the agent, restarted with the new set,
// provisions it.
func (*fitSuite) TestNeverFitsIsRetriedWhenTheSpecChanges(c *gc.C) {
	eachFitStore(c, 4, func(ctx context.Context, f *fitStore) {
		_, err := f.ApplyProvisionerSpec(ctx, "pool", "sha256:four-slots")
		c.Assert(err, gc.IsNil)
		r := f.create(c, ctx, "big", 5)
		c.Assert(f.reconcile(c, r.ID, 1), gc.Equals, provisioner.OutcomePermanent)
		failed := f.get(c, ctx, r.ID)
		c.Check(failed.Status, gc.Equals, domain.StatusError)
		c.Check(failed.Reason, gc.Equals, domain.ReasonNeverFits)
		c.Check(failed.StatusMessage, gc.Equals, `args.slots: 5 slots can never fit provisioner "pool": its largest host has 4 `+
			`(raise a host's slots in the provisioner set, or ask for at most 4)`)
		c.Check(failed.NextAttemptAt, gc.IsNil)
		c.Check(failed.WaitingSince, gc.IsNil)
		waiting, err := f.ListWaitingForCapacity(ctx, 0)
		c.Assert(err, gc.IsNil)
		c.Check(waiting, gc.HasLen, 0)

		// The host gets 8 slots: a new set, a new spec recorded, a new worker.
		workertest.CleanKill(c, f.worker)
		f.set = pool(c, f.State, 8)
		bumped, err := f.ApplyProvisionerSpec(ctx, "pool", "sha256:eight-slots")
		c.Assert(err, gc.IsNil)
		c.Check(bumped, gc.Equals, int64(1))
		f.start(c)
		c.Assert(f.reconcile(c, r.ID, 1), gc.Equals, provisioner.OutcomeReady)
		done := f.get(c, ctx, r.ID)
		c.Check(done.Status, gc.Equals, domain.StatusReady)
		c.Check(done.ObservedGeneration, gc.Equals, int64(2))
		c.Check(done.State["slots"], gc.Equals, float64(5))
	})
}
