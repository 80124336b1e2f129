package provisioner_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/healthcheck"
)

// announcingLocks is a lock set that says which resource each Lock is for, before it waits.
type announcingLocks struct {
	*resourcelock.Set
	locking chan string
}

func newAnnouncingLocks(set *resourcelock.Set) *announcingLocks {
	return &announcingLocks{Set: set, locking: make(chan string, 100)}
}

func (l *announcingLocks) Lock(ctx context.Context, id string) (func(), error) {
	l.locking <- id
	return l.Set.Lock(ctx, id)
}

func (l *announcingLocks) next(c *gc.C) string {
	select {
	case id := <-l.locking:
		return id
	case <-time.After(testkit.LongWait):
		c.Fatalf("no reconcile asked for a lock")
		return ""
	}
}

// lockWithin takes id's lock, failing the test when it is not free within testkit.LongWait.
func (s *workerSuite) lockWithin(c *gc.C, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), testkit.LongWait)
	defer cancel()
	unlock, err := s.locks.Lock(ctx, id)
	c.Assert(err, gc.IsNil, gc.Commentf("%s is still locked", id))
	unlock()
}

// The attempt holds the resource's lock while the broker works, and gives it up with the
// lease; a scheduled retry does not hold it.
func (s *workerSuite) TestHoldsTheLockForTheWholeAttemptOnly(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	s.env.gateReconcile = true
	s.env.script("reconcile", errors.New("host a is busy"))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	c.Assert(s.env.entered.Next(c), gc.Equals, "reconcile:r1")
	_, ok := s.locks.TryLock("r1")
	c.Check(ok, gc.Equals, false)
	s.env.gate.Open(c)
	s.state.waitRow(c, "r1", "waiting to retry", func(r *domain.Resource) bool { return r.NextAttemptAt != nil })
	s.lockWithin(c, "r1")
	c.Check(s.state.leased("r1"), gc.Equals, false)
}

// Killed while it waits for a resource's lock, the worker stops without claiming it.
func (s *workerSuite) TestKillWhileWaitingForTheLock(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	checking, ok := s.locks.TryLock("r1")
	c.Assert(ok, gc.Equals, true)
	defer checking()
	locks := newAnnouncingLocks(s.locks)
	cfg := s.config()
	cfg.Locks = locks
	w := s.start(c, cfg)

	s.watcher.send(c, "r1")
	c.Check(locks.next(c), gc.Equals, "r1")
	workertest.CleanKill(c, w)
	c.Check(s.state.claimCount("r1"), gc.Equals, 0)
}

// checkEnvirons hands the health checker its environ.
type checkEnvirons struct{ env environ.Environ }

func (f checkEnvirons) Get(string) (environ.Environ, string, error) { return f.env, "pool", nil }

// checkStore is the health checker's view of the fake state.
type checkStore struct{ s *fakeState }

func (st checkStore) CountResourcesByStatus(context.Context) (map[domain.Status]int, error) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	out := map[domain.Status]int{}
	for _, r := range st.s.rows {
		out[r.Status]++
	}
	return out, nil
}

func (st checkStore) ListCheckable(_ context.Context, after string, limit int, _ string) ([]domain.Resource, error) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	var ids []string
	for id, r := range st.s.rows {
		if id > after && r.UpToDate() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []domain.Resource
	for _, id := range ids[:min(limit, len(ids))] {
		out = append(out, copyResource(*st.s.rows[id]))
	}
	return out, nil
}

func (st checkStore) RecordHealth(_ context.Context, id string, checked domain.Checked, h domain.HealthUpdate) (domain.Resource, error) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	defer st.s.notify()
	r, ok := st.s.rows[id]
	switch {
	case !ok:
		return domain.Resource{}, domain.ErrNotFound
	case r.Generation != checked.Generation || r.LeaseToken != checked.LeaseToken || !r.UpToDate():
		return domain.Resource{}, domain.ErrStale
	}
	r.Status, r.StatusMessage = h.Status, h.StatusMessage
	return copyResource(*r), nil
}

func (st checkStore) RecordRepairs(_ context.Context, id string, _ []string) error {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if _, ok := st.s.rows[id]; !ok {
		return domain.ErrNotFound
	}
	return nil
}

type noHealthMetrics struct{}

func (noHealthMetrics) ObserveHealthCheck(string, string) {}

// An args change arrives while the health checker checks the resource: the reconcile waits
// for the check to end, then brings the resource to its new generation.
func (s *workerSuite) TestWaitsForAHealthCheckInFlight(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Provisioner: "pool", Status: domain.StatusReady, ObservedGeneration: 1,
		StatusMessage: "ready at generation 1", State: map[string]any{"generation": int64(1)}, Config: map[string]any{"host": "host-r1"}})
	// To the health checker the provisioner's fake environ says which resource it checks and
	// holds the check until the gate opens.
	checking, gate := environtest.NewCalls[string](), environtest.NewGate()
	env := s.env.Environ
	env.CheckResourceFn = func(ctx context.Context, r *environ.Resource, _ *environ.ResourceOptions) (*environ.Resource, error) {
		checking.Add(r.ID)
		if err := gate.Wait(ctx); err != nil {
			return nil, err
		}
		return environtest.Unchanged(r), nil
	}
	checker, err := healthcheck.NewWorker(healthcheck.Config{
		Store:    checkStore{s.state},
		Environs: checkEnvirons{&env},
		Clock:    s.clock,
		Rand:     func() float64 { return 0 },
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:  noHealthMetrics{},
		Locks:    s.locks,
		Settings: healthcheck.Settings{
			Agent:        domain.AgentIdentity{ID: holder, TTL: domain.DefaultAgentTTL},
			Interval:     time.Hour,
			Concurrency:  1,
			PageSize:     10,
			CheckTimeout: time.Hour,
		},
	})
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, checker)
	c.Assert(checking.Next(c), gc.Equals, "r1")

	s.state.updateArgs("r1", map[string]any{"slots": 2})
	locks := newAnnouncingLocks(s.locks)
	cfg := s.config()
	cfg.Locks = locks
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)
	s.watcher.send(c, "r1")
	c.Check(locks.next(c), gc.Equals, "r1")
	c.Check(s.state.claimCount("r1"), gc.Equals, 0)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)

	gate.Open(c)
	s.state.waitRow(c, "r1", "ready at generation 2", ready(2))
	s.state.waitIdle(c, "r1", 1)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 1)
}
