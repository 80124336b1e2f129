package provisioner_test

import (
	"context"
	"encoding/json"
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
	"github.com/berth-dev/berth/watcher"
	"github.com/berth-dev/berth/worker/provisioner"
)

// fairnessSuite runs the worker with the real resources watcher on a real database and a
// static pool with room for everything.
type fairnessSuite struct {
	ctx     context.Context
	cancel  context.CancelFunc
	cleanup func()
	state   *postgres.State
	clock   *testclock.Clock
	set     *environ.Set
}

var _ = gc.Suite(&fairnessSuite{})

// fairBurst is owner A's burst in the fairness tests, fairConcurrency the worker's
// reconciles at once.
const (
	fairBurst       = 600
	fairConcurrency = 4
)

func (s *fairnessSuite) SetUpTest(c *gc.C) {
	s.ctx, s.cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	s.state, s.cleanup, err = postgrestest.New(s.ctx)
	c.Assert(err, gc.IsNil)
	s.clock = testclock.NewClock(time.Now().Truncate(time.Second))
	spec, err := json.Marshal(map[string]any{
		"runtimes":    []map[string]any{{"host": poolHost, "slots": 2 * fairBurst}},
		"health_path": "",
	})
	c.Assert(err, gc.IsNil)
	env, err := static.New("pool", spec, environ.Deps{Slots: s.state, Resources: s.state, Clock: s.clock})
	c.Assert(err, gc.IsNil)
	s.set = &environ.Set{Default: "pool", Environs: map[string]environ.Environ{"pool": env}, Catalog: shippedCatalog()}
}

func (s *fairnessSuite) TearDownTest(c *gc.C) {
	if s.cleanup != nil {
		s.cleanup()
	}
	s.cancel()
}

// insert adds n runtimes of owner in one statement, as another program writing the table
// would.
func (s *fairnessSuite) insert(c *gc.C, prefix, owner string, n int) {
	_, err := s.state.Pool().Exec(s.ctx, `
		INSERT INTO resources (type, name, owner, provisioner, args)
		SELECT 'runtime', $1 || '-' || i, $3, 'pool', '{"slots":1}' FROM generate_series(0, $2 - 1) AS i`, prefix, n, owner)
	c.Assert(err, gc.IsNil)
}

// readyBefore counts owner's runtimes that were ready before the runtime named name.
func (s *fairnessSuite) readyBefore(c *gc.C, owner, name string) int {
	var n int
	c.Assert(s.state.Pool().QueryRow(s.ctx, `
		SELECT count(*) FROM resources
		 WHERE owner = $1 AND ready_at < (SELECT ready_at FROM resources WHERE name = $2)`, owner, name).Scan(&n), gc.IsNil)
	return n
}

func (s *fairnessSuite) waitReady(c *gc.C, n int) {
	deadline := time.Now().Add(time.Minute)
	for {
		var ready int
		c.Assert(s.state.Pool().QueryRow(s.ctx, `SELECT count(*) FROM resources WHERE status = 'ready'`).Scan(&ready), gc.IsNil)
		if ready >= n {
			return
		}
		if time.Now().After(deadline) {
			c.Fatalf("%d of %d resources ready after a minute", ready, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nthReady is the ready time of owner's nth runtime to be ready (from 1).
func (s *fairnessSuite) nthReady(c *gc.C, owner string, n int) time.Time {
	var at time.Time
	c.Assert(s.state.Pool().QueryRow(s.ctx, `
		SELECT ready_at FROM resources WHERE owner = $1 ORDER BY ready_at OFFSET $2 LIMIT 1`, owner, n-1).Scan(&at), gc.IsNil)
	return at
}

// readyBy counts owner's runtimes ready before at.
func (s *fairnessSuite) readyBy(c *gc.C, owner string, at time.Time) int {
	var n int
	c.Assert(s.state.Pool().QueryRow(s.ctx, `
		SELECT count(*) FROM resources WHERE owner = $1 AND ready_at < $2`, owner, at).Scan(&n), gc.IsNil)
	return n
}

func (s *fairnessSuite) start(c *gc.C) *provisioner.Worker {
	w, err := provisioner.NewWorker(provisioner.Config{
		State:    s.state,
		Environs: s.set,
		NewWatcher: func() (provisioner.Watcher, error) {
			return watcher.NewResourcesWatcher(watcher.ResourcesConfig{
				Source: s.state,
				Clock:  s.clock,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				ResourcesSettings: watcher.ResourcesSettings{
					PollInterval:          time.Hour, // wake-ups only
					OverdueAfter:          15 * time.Second,
					GapTimeout:            time.Minute,
					BatchSize:             watcher.DefaultBatchSize,
					EventSize:             watcher.DefaultEventSize,
					ReadAhead:             watcher.DefaultReadAhead,
					OwnerPoliciesInterval: time.Hour,
				},
			})
		},
		Clock:   s.clock,
		Rand:    func() float64 { return 0.5 },
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics: newFakeMetrics(),
		Locks:   new(resourcelock.Set),
		Owners:  s.state,
		Settings: provisioner.Settings{
			Agent:            domain.AgentIdentity{ID: holder, TTL: 15 * time.Second},
			Concurrency:      fairConcurrency,
			AwaitConcurrency: fairConcurrency,
			LeaseTTL:         leaseTTL,
			ReconcileTimeout: reconcileTimeout,
			BackoffBase:      backoffBase,
			BackoffMax:       backoffMax,
			CapacityRetry:    capacityRetry,
			ShareGrace:       2 * time.Second,

			OwnerPoliciesInterval: time.Hour,
		},
	})
	c.Assert(err, gc.IsNil)
	return w.(*provisioner.Worker)
}

// A runtime of owner B created just after owner A's burst is reconciled before most of the
// burst: the watcher reads the burst ahead and the owners take turns, where change order
// would have served B last.
func (s *fairnessSuite) TestALateOwnerIsServedBeforeMostOfABurst(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	waitReport(c, w, "in-flight", 0)

	s.insert(c, "a", "owner-a", fairBurst)
	s.insert(c, "b", "owner-b", 1)
	s.waitReady(c, fairBurst+1)

	// What the loop holds when B's runtime reaches it (at most the queue's high-water mark
	// and an event) may go first; the rest of the burst waits its turn.
	ahead := s.readyBefore(c, "owner-a", "b-0")
	c.Check(ahead < provisioner.QueueHighWater+watcher.DefaultEventSize, gc.Equals, true,
		gc.Commentf("%d of owner A's %d runtimes were ready before owner B's one", ahead, fairBurst))
}

// At start, the backlog of resources needing attention is read ahead in pages and the
// owners take turns in it too.
func (s *fairnessSuite) TestTheBacklogAtStartInterleavesOwners(c *gc.C) {
	s.insert(c, "a", "owner-a", fairBurst)
	s.insert(c, "b", "owner-b", 3)
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.waitReady(c, fairBurst+3)

	for _, name := range []string{"b-0", "b-1", "b-2"} {
		ahead := s.readyBefore(c, "owner-a", name)
		c.Check(ahead < 3*fairConcurrency, gc.Equals, true,
			gc.Commentf("%d of owner A's runtimes were ready before owner B's %s", ahead, name))
	}
}

// The owners' weights set their shares while both have work waiting.
func (s *fairnessSuite) TestWeightsSetTheOwnersShares(c *gc.C) {
	_, err := s.state.SetOwnerPolicy(s.ctx, domain.OwnerPolicy{Owner: "owner-a", Weight: 3})
	c.Assert(err, gc.IsNil)
	s.insert(c, "a", "owner-a", fairBurst)
	s.insert(c, "b", "owner-b", 200)
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.waitReady(c, fairBurst+200)

	// When B's 100th runtime is ready, about 300 of A's are: 3 to 1.
	ahead := s.readyBy(c, "owner-a", s.nthReady(c, "owner-b", 100))
	c.Check(ahead > 250 && ahead < 350, gc.Equals, true, gc.Commentf("%d of owner A's runtimes ready before B's 100th", ahead))
}
