package healthcheck_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/juju/clock"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/internal/testkit"
)

// shortWait is how long a test waits to see that no check comes.
const shortWait = 50 * time.Millisecond

// fakeStore keeps resources in memory with RecordHealth's conditions, and announces every
// call on changed.
type fakeStore struct {
	mu        sync.Mutex
	rows      map[string]*domain.Resource
	pages     []string // "after/limit/holder" of every ListCheckable
	records   []domain.HealthUpdate
	changed   chan struct{} // closed and replaced on every call
	countErr  error
	recordErr map[string]error // RecordHealth fails for these ids
	repairs   map[string][]string
	// repairsErr fails every RecordRepairs; repairCalls counts them, failed or not.
	repairsErr  error
	repairCalls []string
}

func newFakeStore() *fakeStore {
	return &fakeStore{rows: make(map[string]*domain.Resource), changed: make(chan struct{})}
}

// add puts a resource ready at generation 1 on provisioner "pool".
func (s *fakeStore) add(id string) {
	s.addOn(id, "pool")
}

// addOn puts a resource ready at generation 1 on the provisioner.
func (s *fakeStore) addOn(id, provisioner string) {
	s.addCreated(id, provisioner, time.Time{})
}

// addCreated puts a resource created at createdAt, ready at generation 1, on the provisioner.
func (s *fakeStore) addCreated(id, provisioner string, createdAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[id] = &domain.Resource{ID: id, Type: domain.ResourceTypeRuntime, Provisioner: provisioner, Generation: 1, ObservedGeneration: 1,
		Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "ready at generation 1", State: map[string]any{"host": "a"}, Config: map[string]any{},
		CreatedAt: createdAt}
	s.notify()
}

func (s *fakeStore) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *fakeStore) CountResourcesByStatus(ctx context.Context) (map[domain.Status]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.countErr != nil {
		return nil, s.countErr
	}
	out := map[domain.Status]int{}
	for _, r := range s.rows {
		out[r.Status]++
	}
	return out, nil
}

func (s *fakeStore) ListCheckable(ctx context.Context, after string, limit int, holder string) ([]domain.Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	s.pages = append(s.pages, fmt.Sprintf("%s/%d/%s", after, limit, holder))
	var ids []string
	for id, r := range s.rows {
		if (r.Status == domain.StatusReady || r.Status == domain.StatusUnhealthy) && id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []domain.Resource
	for _, id := range ids[:min(limit, len(ids))] {
		out = append(out, *s.rows[id])
	}
	return out, nil
}

func (s *fakeStore) RecordHealth(ctx context.Context, id string, checked domain.Checked, h domain.HealthUpdate) (domain.Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	s.records = append(s.records, h)
	if err := s.recordErr[id]; err != nil {
		return domain.Resource{}, err
	}
	r, ok := s.rows[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	if r.Generation != checked.Generation || r.LeaseToken != checked.LeaseToken || (r.Status != domain.StatusReady && r.Status != domain.StatusUnhealthy) {
		return domain.Resource{}, domain.ErrStale
	}
	r.Status, r.Reason, r.StatusMessage = h.Status, h.Reason, h.StatusMessage
	if h.Status == domain.StatusUnhealthy {
		if r.UnhealthySince == nil {
			since := h.UnhealthySince
			r.UnhealthySince = &since
		}
	} else {
		r.UnhealthySince = nil
	}
	if h.State != nil {
		r.State = h.State
	}
	if h.Config != nil {
		r.Config = h.Config
	}
	return *r, nil
}

func (s *fakeStore) RecordRepairs(ctx context.Context, id string, repairs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notify()
	s.repairCalls = append(s.repairCalls, id)
	if s.repairsErr != nil {
		return s.repairsErr
	}
	if _, ok := s.rows[id]; !ok {
		return domain.ErrNotFound
	}
	if s.repairs == nil {
		s.repairs = make(map[string][]string)
	}
	s.repairs[id] = append(s.repairs[id], repairs...)
	return nil
}

func (s *fakeStore) row(id string) domain.Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.rows[id]
}

// waitFor waits until pred, called with the store locked, holds.
func (s *fakeStore) waitFor(c *gc.C, what string, pred func() bool) {
	timeout := time.After(testkit.LongWait)
	for {
		s.mu.Lock()
		ok := pred()
		changed := s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			c.Fatalf("timed out waiting for %s", what)
		}
	}
}

// call is one CheckResource (or Check, with id "") and the clock's time when it began.
type call struct {
	id string
	at time.Time
}

// fakeEnviron answers resource checks with the errors and results a test scripts, by id, and
// logs each check on calls; with block set, every check waits at gate.
type fakeEnviron struct {
	environtest.Environ
	calls *environtest.Calls[call]
	gate  *environtest.Gate

	mu     sync.Mutex
	errs   map[string]error    // CheckResource errors by id
	labels []map[string]string // the labels of every CheckResource's options, in order
	// checked is what every CheckResource was told the check read of the row, in order.
	checked []*domain.Checked
	result  map[string]*environ.Resource
	block   bool
}

func newFakeEnviron(clk clock.Clock) *fakeEnviron {
	e := &fakeEnviron{calls: environtest.NewCalls[call](), gate: environtest.NewGate(), errs: map[string]error{}, result: map[string]*environ.Resource{}}
	e.CheckResourceFn = func(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
		e.mu.Lock()
		e.labels = append(e.labels, opts.Labels)
		e.checked = append(e.checked, r.Checked)
		e.mu.Unlock()
		e.calls.Add(call{id: r.ID, at: clk.Now()})
		e.mu.Lock()
		block, err, res := e.block, e.errs[r.ID], e.result[r.ID]
		e.mu.Unlock()
		if block {
			if err := e.gate.Wait(ctx); err != nil {
				return nil, err
			}
		}
		if res == nil {
			res = environtest.Unchanged(r)
		}
		return res, err
	}
	return e
}

func (e *fakeEnviron) set(f func(e *fakeEnviron)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e)
}

// fakeEnvirons is a provisioner set.
type fakeEnvirons struct {
	envs map[string]environ.Environ
}

func (f *fakeEnvirons) Get(name string) (environ.Environ, string, error) {
	env, ok := f.envs[name]
	if !ok {
		return nil, name, fmt.Errorf("provisioner %q is not in the provisioner set", name)
	}
	return env, name, nil
}

// sequence returns a Rand that yields values in turn, then the last one forever.
func sequence(values ...float64) func() float64 {
	var mu sync.Mutex
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		v := values[0]
		if len(values) > 1 {
			values = values[1:]
		}
		return v
	}
}

// logCapture is a slog.Handler that keeps every record's message and provisioner.
type logCapture struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

func newLogCapture() *logCapture { return &logCapture{changed: make(chan struct{})} }

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCapture) WithGroup(string) slog.Handler            { return l }

func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "provisioner" {
			line += " " + a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}

// waitCount waits until line was logged n times.
func (l *logCapture) waitCount(c *gc.C, line string, n int) {
	timeout := time.After(testkit.LongWait)
	for {
		l.mu.Lock()
		got := 0
		for _, have := range l.lines {
			if have == line {
				got++
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			c.Fatalf("timed out waiting for %q to be logged %d times", line, n)
		}
	}
}

// observation is one call to fakeMetrics: a resource check's result, under kind "resource".
type observation struct {
	kind, provisioner, result string
}

// fakeMetrics records what the worker observes, in order.
type fakeMetrics struct {
	mu      sync.Mutex
	seen    []observation
	changed chan struct{}
}

func newFakeMetrics() *fakeMetrics { return &fakeMetrics{changed: make(chan struct{})} }

func (m *fakeMetrics) add(o observation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, o)
	close(m.changed)
	m.changed = make(chan struct{})
}

// observations returns every observation so far.
func (m *fakeMetrics) observations() []observation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]observation(nil), m.seen...)
}

func (m *fakeMetrics) ObserveHealthCheck(provisioner, result string) {
	m.add(observation{kind: "resource", provisioner: provisioner, result: result})
}

// wait waits for n observations of kind and returns them sorted.
func (m *fakeMetrics) wait(c *gc.C, kind string, n int) []observation {
	timeout := time.After(testkit.LongWait)
	for {
		m.mu.Lock()
		var got []observation
		for _, o := range m.seen {
			if o.kind == kind {
				got = append(got, o)
			}
		}
		changed := m.changed
		m.mu.Unlock()
		if len(got) >= n {
			slices.SortFunc(got, func(a, b observation) int {
				return strings.Compare(a.provisioner+"/"+a.result, b.provisioner+"/"+b.result)
			})
			return got
		}
		select {
		case <-changed:
		case <-timeout:
			c.Fatalf("timed out waiting for %d %s observations; have %v", n, kind, got)
		}
	}
}

// fakeAgents lists the agents a test sets, each live unless set otherwise, or fails with err;
// it keeps the ttl of every call.
type fakeAgents struct {
	mu     sync.Mutex
	agents []domain.Agent
	err    error
	ttls   []time.Duration
}

func newFakeAgents(live ...string) *fakeAgents {
	f := &fakeAgents{}
	f.setLive(live...)
	return f
}

// setLive makes the listing the given agents, all live.
func (f *fakeAgents) setLive(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agents = nil
	for _, id := range ids {
		f.agents = append(f.agents, domain.Agent{ID: id, Live: true})
	}
}

func (f *fakeAgents) set(fn func(f *fakeAgents)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeAgents) ListAgents(ctx context.Context, ttl time.Duration) ([]domain.Agent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ttls = append(f.ttls, ttl)
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.agents), nil
}
