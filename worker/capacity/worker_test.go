package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/capacity"
)

// fakeStore keeps samples and warnings in memory, with SetCapacityWarning's semantics.
type fakeStore struct {
	mu       sync.Mutex
	samples  []domain.CapacitySample
	warnings map[string]domain.CapacityWarning // by provisioner/kind
	writes   []string                          // "provisioner/kind active" of every SetCapacityWarning
}

func newFakeStore() *fakeStore {
	return &fakeStore{warnings: make(map[string]domain.CapacityWarning)}
}

// workerTerm is the leadership term the worker tests run under; the fake store refuses
// writes under any other.
var workerTerm = domain.Term{Holder: "agent-a", Session: 2}

func checkTerm(term domain.Term) error {
	if term != workerTerm {
		return fmt.Errorf("write under term %+v, not %+v: %w", term, workerTerm, domain.ErrNotLeader)
	}
	return nil
}

func (s *fakeStore) RecordCapacity(ctx context.Context, term domain.Term, samples []domain.CapacitySample) error {
	if err := checkTerm(term); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, samples...)
	return nil
}

func (s *fakeStore) ListCapacityWarnings(ctx context.Context) ([]domain.CapacityWarning, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []domain.CapacityWarning
	for _, w := range s.warnings {
		out = append(out, w)
	}
	return out, nil
}

func (s *fakeStore) SetCapacityWarning(ctx context.Context, term domain.Term, w domain.CapacityWarning) (bool, error) {
	if err := checkTerm(term); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := w.Provisioner + "/" + w.Kind
	s.writes = append(s.writes, fmt.Sprintf("%s %v", key, w.Active))
	previous := s.warnings[key]
	if previous.Active == w.Active && !previous.Since.IsZero() {
		w.Since = previous.Since
	}
	s.warnings[key] = w
	return previous.Active != w.Active, nil
}

func (s *fakeStore) writesSoFar() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

// capacityScript is what an environ reports as its capacity until a test sets another.
type capacityScript struct {
	mu  sync.Mutex
	c   environ.Capacity
	err error
}

func (s *capacityScript) set(c environ.Capacity, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c, s.err = c, err
}

// environ is an environ reporting the script's capacity.
func (s *capacityScript) environ() environ.Environ {
	return &environtest.CapacityReporter{CapacityFn: func(context.Context) (environ.Capacity, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.c, s.err
	}}
}

type fakeEnvirons map[string]environ.Environ

func (f fakeEnvirons) Names() []string {
	var names []string
	for _, n := range []string{"broken", "plain", "pool", "second"} {
		if _, ok := f[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

func (f fakeEnvirons) Get(name string) (environ.Environ, string, error) {
	return f[name], name, nil
}

// observer records what it is shown; samples says how many warning observations came.
type observer struct {
	mu         sync.Mutex
	capacities []string
	warnings   map[string]bool
	observed   int
	forgotten  bool // ForgetCapacity was called
	changed    chan struct{}
}

func newObserver() *observer {
	return &observer{warnings: make(map[string]bool), changed: make(chan struct{})}
}

func (o *observer) ObserveCapacity(provisioner string, c environ.Capacity) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.capacities = append(o.capacities, fmt.Sprintf("%s %d/%d", provisioner, c.Used, c.Total))
}

func (o *observer) ForgetCapacity() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.capacities, o.warnings, o.forgotten = nil, make(map[string]bool), true
}

func (o *observer) ObserveCapacityWarning(provisioner, kind string, active bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.warnings[provisioner+"/"+kind] = active
	o.observed++
	close(o.changed)
	o.changed = make(chan struct{})
}

// waitObserved waits until n warning observations came.
func (o *observer) waitObserved(c *gc.C, n int) {
	timeout := time.After(testkit.LongWait)
	for {
		o.mu.Lock()
		done, changed := o.observed >= n, o.changed
		o.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			c.Fatalf("timed out waiting for %d warning observations", n)
		}
	}
}

func (o *observer) active(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.warnings[key]
}

type workerSuite struct {
	t0       time.Time
	clock    *testclock.Clock
	store    *fakeStore
	pool     *capacityScript
	observer *observer
	config   capacity.Config
}

var _ = gc.Suite(&workerSuite{})

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.clock = testclock.NewClock(s.t0)
	s.store = newFakeStore()
	s.pool = &capacityScript{}
	s.observer = newObserver()
	s.config = capacity.Config{
		Store:    s.store,
		Environs: fakeEnvirons{"pool": s.pool.environ(), "plain": &environtest.Environ{}},
		Clock:    s.clock,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observer: s.observer,
		Term:     workerTerm,
		Settings: capacity.Settings{
			Interval:   time.Minute,
			Timeout:    10 * time.Second,
			Thresholds: capacity.Thresholds{Total: 0.8, Host: 0.7},
		},
	}
}

func twoHosts(usedA, usedB int64, bDown bool) environ.Capacity {
	return environ.Capacity{Unit: "slots", Total: 20, Used: usedA + usedB, Hosts: []environ.HostCapacity{
		{Host: "http://a", Total: 10, Used: usedA}, {Host: "http://b", Total: 10, Used: usedB, Down: bDown},
	}}
}

func (s *workerSuite) start(c *gc.C) worker.Worker {
	w, err := capacity.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	return w
}

// tick lets one more sample happen and waits for it.
func (s *workerSuite) tick(c *gc.C, sample int) {
	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	s.observer.waitObserved(c, sample*len(capacity.Kinds))
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*capacity.Config)
		field  string
	}{
		{func(cfg *capacity.Config) { cfg.Store = nil }, "Store"},
		{func(cfg *capacity.Config) { cfg.Environs = nil }, "Environs"},
		{func(cfg *capacity.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *capacity.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *capacity.Config) { cfg.Interval = 0 }, "Interval 0s .*positive"},
		{func(cfg *capacity.Config) { cfg.Timeout = 0 }, "Timeout 0s .*positive"},
		{func(cfg *capacity.Config) { cfg.Thresholds.Total = 80 }, `Thresholds.Total 80 \(must be a fraction in \(0, 1\].*`},
		{func(cfg *capacity.Config) { cfg.Thresholds.Host = 0 }, `Thresholds.Host 0 \(must be a fraction in \(0, 1\].*`},
	} {
		config := s.config
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := capacity.NewWorker(config)
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	s.config.Observer = nil
	c.Check(s.config.Validate(), gc.IsNil)
}

func (s *workerSuite) TestRecordsSamples(c *gc.C) {
	s.pool.set(twoHosts(3, 1, true), nil)
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.observer.waitObserved(c, 3)

	s.store.mu.Lock()
	samples := append([]domain.CapacitySample(nil), s.store.samples...)
	s.store.mu.Unlock()
	c.Check(samples, gc.DeepEquals, []domain.CapacitySample{
		{At: s.t0, Provisioner: "pool", Unit: "slots", Total: 20, Used: 4},
		{At: s.t0, Provisioner: "pool", Host: "http://a", Unit: "slots", Total: 10, Used: 3},
		{At: s.t0, Provisioner: "pool", Host: "http://b", Unit: "slots", Total: 10, Used: 1, Down: true},
	})
	c.Check(s.observer.capacities, gc.DeepEquals, []string{"pool 4/20"})
	report := w.(worker.Reporter).Report()
	c.Check(report["pool"].(map[string]any)["free"], gc.Equals, int64(16))
	c.Check(report["plain"], gc.IsNil)
}

// A worker whose leadership term ended (another agent took over while it was paused) has
// its samples and warnings refused: it records nothing and reports why.
func (s *workerSuite) TestAFormerLeaderRecordsNothing(c *gc.C) {
	s.config.Term = domain.Term{Holder: "agent-a", Session: 1}
	s.pool.set(twoHosts(10, 10, false), nil)
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.observer.waitObserved(c, 3)

	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	c.Check(s.store.samples, gc.HasLen, 0)
	c.Check(s.store.writes, gc.HasLen, 0)
	c.Check(w.(worker.Reporter).Report()["pool"].(map[string]any)["error"], gc.Matches, ".*leadership term the write carried has ended")
}

// A worker that stops (its agent no longer leads) drops what it exported: the new leader's
// figures are the current ones.
func (s *workerSuite) TestStoppingForgetsTheFiguresShown(c *gc.C) {
	s.pool.set(twoHosts(3, 1, true), nil)
	w := s.start(c)
	s.observer.waitObserved(c, 3)
	workertest.CleanKill(c, w)
	s.observer.mu.Lock()
	defer s.observer.mu.Unlock()
	c.Check(s.observer.forgotten, gc.Equals, true)
	c.Check(s.observer.capacities, gc.HasLen, 0)
}

func (s *workerSuite) TestWarningsRaiseAndClearOncePerCrossing(c *gc.C) {
	s.pool.set(twoHosts(5, 5, false), nil)
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.observer.waitObserved(c, 3)
	c.Check(s.store.writesSoFar(), gc.HasLen, 0)

	// Above 80% for three samples: raised once. The hosts warning (every host at least 70%)
	// rises with it.
	for i, used := range []int64{9, 10, 9} {
		s.pool.set(twoHosts(used, 8, false), nil)
		s.tick(c, i+2)
	}
	c.Check(s.store.writesSoFar(), gc.DeepEquals, []string{"pool/total true", "pool/hosts true"})
	c.Check(s.observer.active("pool/total"), gc.Equals, true)
	c.Check(w.(worker.Reporter).Report()["pool"].(map[string]any)["warnings"], gc.DeepEquals, []string{"total", "hosts"})
	stored := s.store.warnings["pool/total"]
	c.Check(stored.Since, gc.Equals, s.t0.Add(time.Minute))
	c.Check(stored.Message, gc.Equals, "85% of 20 slots used (threshold 80%; down hosts excluded)")

	// b goes down with its 8 slots: a alone is 60% used, so both clear, once.
	for i := range 2 {
		s.pool.set(twoHosts(6, 8, true), nil)
		s.tick(c, i+5)
	}
	c.Check(s.store.writesSoFar(), gc.DeepEquals, []string{"pool/total true", "pool/hosts true", "pool/total false", "pool/hosts false"})
	c.Check(s.observer.active("pool/total"), gc.Equals, false)

	// a goes down too: nothing usable is left.
	s.pool.set(environ.Capacity{Unit: "slots", Hosts: []environ.HostCapacity{{Host: "http://a", Total: 10, Down: true}}}, nil)
	s.tick(c, 7)
	c.Check(s.store.writesSoFar()[4:], gc.DeepEquals, []string{"pool/no-usable-hosts true"})
}

func (s *workerSuite) TestARestartDoesNotRaiseAgain(c *gc.C) {
	s.store.warnings["pool/total"] = domain.CapacityWarning{Provisioner: "pool", Kind: "total", Active: true, Since: s.t0.Add(-time.Hour)}
	s.store.warnings["gone/total"] = domain.CapacityWarning{Provisioner: "gone", Kind: "total", Active: true, Since: s.t0.Add(-time.Hour)}
	s.pool.set(twoHosts(9, 8, false), nil)
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.observer.waitObserved(c, 3)
	// Only the new hosts warning is written, and the warning of a provisioner that is gone
	// is cleared.
	c.Check(s.store.writesSoFar(), gc.DeepEquals, []string{"gone/total false", "pool/hosts true"})
	c.Check(s.store.warnings["pool/total"].Since, gc.Equals, s.t0.Add(-time.Hour))
}

func (s *workerSuite) TestAFailingEnvironDoesNotStopTheOthers(c *gc.C) {
	broken := &capacityScript{}
	broken.set(environ.Capacity{}, errors.New("cluster unreachable"))
	second := &capacityScript{}
	second.set(twoHosts(1, 1, false), nil)
	s.config.Environs = fakeEnvirons{"broken": broken.environ(), "pool": s.pool.environ(), "second": second.environ()}
	s.pool.set(twoHosts(1, 1, false), nil)
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.observer.waitObserved(c, 6)
	report := w.(worker.Reporter).Report()
	c.Check(report["broken"], gc.DeepEquals, map[string]any{"error": "cluster unreachable"})
	c.Check(s.observer.capacities, gc.DeepEquals, []string{"pool 2/20", "second 2/20"})
}
