package membership_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/membership"
)

type workerSuite struct {
	clock   *testclock.Clock
	store   *fakeStore
	metrics *fakeMetrics
	logs    *syncBuffer
	config  membership.Config
}

var _ = gc.Suite(&workerSuite{})

// call is one call the worker made of the store.
type call struct {
	method  string
	info    domain.AgentInfo
	id      string
	session int64
	d       time.Duration // ListAgents' ttl, PruneAgents' age
	names   []string      // SetAgentProvisioners' names
	ctxErr  error         // the context's error when the call was made
}

// fakeStore reports every call and answers with its function fields.
type fakeStore struct {
	calls     chan call
	register  func(ctx context.Context) (int64, error)
	heartbeat func(ctx context.Context) error
	resign    func(ctx context.Context) error
	// provisioners answers SetAgentProvisioners; nil: success.
	provisioners func(ctx context.Context) error
}

func (f *fakeStore) RegisterAgent(ctx context.Context, info domain.AgentInfo) (int64, error) {
	f.calls <- call{method: "register", info: info, ctxErr: ctx.Err()}
	return f.register(ctx)
}

func (f *fakeStore) HeartbeatAgent(ctx context.Context, id string, session int64) error {
	f.calls <- call{method: "heartbeat", id: id, session: session, ctxErr: ctx.Err()}
	return f.heartbeat(ctx)
}

func (f *fakeStore) ResignAgent(ctx context.Context, id string, session int64) error {
	f.calls <- call{method: "resign", id: id, session: session, ctxErr: ctx.Err()}
	return f.resign(ctx)
}

func (f *fakeStore) ListAgents(ctx context.Context, ttl time.Duration) ([]domain.Agent, error) {
	f.calls <- call{method: "list", d: ttl}
	return []domain.Agent{{ID: "agent-a", Live: true}, {ID: "agent-b", Live: true}, {ID: "gone"}}, nil
}

func (f *fakeStore) SetAgentProvisioners(ctx context.Context, id string, session int64, names []string) error {
	f.calls <- call{method: "provisioners", id: id, session: session, names: names, ctxErr: ctx.Err()}
	if f.provisioners == nil {
		return nil
	}
	return f.provisioners(ctx)
}

func (f *fakeStore) PruneAgents(ctx context.Context, olderThan time.Duration) (int64, error) {
	f.calls <- call{method: "prune", d: olderThan}
	return 1, nil
}

// fakeMetrics reports every count of live agents.
type fakeMetrics struct{ live chan int }

func (m *fakeMetrics) ObserveAgentsLive(n int) { m.live <- n }

// syncBuffer is a log the worker writes while the test reads it.
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

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s.store = &fakeStore{
		calls:     make(chan call, 20),
		register:  func(context.Context) (int64, error) { return 7, nil },
		heartbeat: func(context.Context) error { return nil },
		resign:    func(context.Context) error { return nil },
	}
	s.metrics = &fakeMetrics{live: make(chan int, 20)}
	s.logs = &syncBuffer{}
	s.config = membership.Config{
		Store:   s.store,
		Clock:   s.clock,
		Logger:  slog.New(slog.NewTextHandler(s.logs, nil)),
		Metrics: s.metrics,
		Settings: membership.Settings{
			Agent:             domain.AgentInfo{ID: "agent-a", Version: "v1", HTTPAddr: "127.0.0.1:8080"},
			HeartbeatInterval: 2 * time.Second,
			TTL:               15 * time.Second,
			Timeout:           10 * time.Second,
			ResignTimeout:     5 * time.Second,
			PruneInterval:     time.Hour,
			PruneAfter:        24 * time.Hour,
		},
	}
}

// expect returns the worker's next call of the store, which must be of method.
func (s *workerSuite) expect(c *gc.C, method string) call {
	select {
	case got := <-s.store.calls:
		c.Assert(got.method, gc.Equals, method)
		return got
	case <-time.After(testkit.LongWait):
		c.Fatalf("the worker made no %s call", method)
	}
	panic("unreachable")
}

func (s *workerSuite) expectNoCall(c *gc.C) {
	select {
	case got := <-s.store.calls:
		c.Fatalf("unexpected call %+v", got)
	default:
	}
}

func (s *workerSuite) expectLive(c *gc.C, want int) {
	select {
	case got := <-s.metrics.live:
		c.Check(got, gc.Equals, want)
	case <-time.After(testkit.LongWait):
		c.Fatal("the worker observed no count of live agents")
	}
}

// start starts the worker and takes its registration and first prune.
func (s *workerSuite) start(c *gc.C) reportingWorker {
	w, err := membership.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	reg := s.expect(c, "register")
	c.Check(reg.info, gc.Equals, s.config.Agent)
	c.Check(s.expect(c, "list").d, gc.Equals, 15*time.Second)
	s.expectLive(c, 2)
	c.Check(s.expect(c, "prune").d, gc.Equals, 24*time.Hour)
	return w.(reportingWorker)
}

type reportingWorker interface {
	worker.Worker
	Report() map[string]any
}

// tick fires the next heartbeat once the worker waits for it (its heartbeat and prune
// timers are its only ones).
func (s *workerSuite) tick(c *gc.C) {
	c.Assert(s.clock.WaitAdvance(s.config.HeartbeatInterval, testkit.LongWait, 2), gc.IsNil)
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*membership.Config)
		field  string
	}{
		{func(cfg *membership.Config) { cfg.Store = nil }, "Store"},
		{func(cfg *membership.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *membership.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *membership.Config) { cfg.Metrics = nil }, "Metrics"},
		{func(cfg *membership.Config) { cfg.Agent.ID = "" }, "Agent.ID .*is empty"},
		{func(cfg *membership.Config) { cfg.HeartbeatInterval = 0 }, "HeartbeatInterval 0s"},
		{func(cfg *membership.Config) { cfg.TTL = 3 * time.Second }, `TTL 3s \(must be at least twice HeartbeatInterval 2s, so that one late heartbeat`},
		{func(cfg *membership.Config) { cfg.Timeout = 0 }, "Timeout 0s"},
		{func(cfg *membership.Config) { cfg.ResignTimeout = -time.Second }, "ResignTimeout -1s"},
		{func(cfg *membership.Config) { cfg.PruneInterval = 0 }, "PruneInterval 0s"},
		{func(cfg *membership.Config) { cfg.PruneAfter = 15 * time.Second }, `TTL 15s \(must be less than PruneAfter 15s: agents silent that long are removed\)`},
	} {
		config := s.config
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := membership.NewWorker(config)
		c.Check(w, gc.IsNil)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.config.Validate(), gc.IsNil)
}

func (s *workerSuite) TestRegistersHeartbeatsAndResigns(c *gc.C) {
	w := s.start(c)
	c.Check(w.Report(), gc.DeepEquals, map[string]any{
		"id": "agent-a", "session": int64(7), "live-agents": 2, "last-heartbeat": s.clock.Now(),
	})
	select {
	case <-w.(membership.Registration).Registered():
	default:
		c.Fatalf("Registered is not closed once the agent registered")
	}
	for range 3 {
		s.tick(c)
		hb := s.expect(c, "heartbeat")
		c.Check(hb.id, gc.Equals, "agent-a")
		c.Check(hb.session, gc.Equals, int64(7))
		s.expect(c, "list")
		s.expectLive(c, 2)
	}
	c.Check(w.Report()["last-heartbeat"], gc.Equals, s.clock.Now())

	workertest.CleanKill(c, w)
	resign := s.expect(c, "resign")
	c.Check(resign.id, gc.Equals, "agent-a")
	c.Check(resign.session, gc.Equals, int64(7))
	c.Check(resign.ctxErr, gc.IsNil, gc.Commentf("the resignation's context must outlive the worker's"))
	s.expectNoCall(c)
	c.Check(s.logs.String(), gc.Matches, `(?s).*resigned.*agent-id=agent-a session=7.*`)
}

func (s *workerSuite) TestFailedHeartbeatIsRetriedAtTheNextOne(c *gc.C) {
	failures := make(chan error, 1)
	failures <- errors.New("connection refused")
	s.store.heartbeat = func(context.Context) error {
		select {
		case err := <-failures:
			return err
		default:
			return nil
		}
	}
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	s.tick(c)
	s.expect(c, "heartbeat")
	s.tick(c) // waits for the failed heartbeat to be done with
	c.Check(s.logs.String(), gc.Matches, `(?s).*heartbeat failed; trying again at the next one.*connection refused.*`)
	s.expect(c, "heartbeat")
	s.expect(c, "list")
	s.expectLive(c, 2)
	workertest.CheckAlive(c, w)
	_, failing := w.Report()["heartbeat-error"]
	c.Check(failing, gc.Equals, false)
}

func (s *workerSuite) TestSessionMovedOnEndsTheWorker(c *gc.C) {
	s.store.heartbeat = func(context.Context) error {
		return fmt.Errorf("agent agent-a session 7: %w", domain.ErrSessionEnded)
	}
	w := s.start(c)
	s.tick(c)
	s.expect(c, "heartbeat")
	err := workertest.CheckKilled(c, w)
	c.Check(errors.Is(err, domain.ErrSessionEnded), gc.Equals, true, gc.Commentf("err = %v", err))
	s.expectNoCall(c) // no resignation: the registration is another process's now
}

func (s *workerSuite) TestFailedRegistrationEndsTheWorker(c *gc.C) {
	s.store.register = func(context.Context) (int64, error) { return 0, errors.New("connection refused") }
	w, err := membership.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	s.expect(c, "register")
	err = workertest.CheckKilled(c, w)
	c.Check(err, gc.ErrorMatches, "register agent agent-a: connection refused")
	s.expectNoCall(c)
	select {
	case <-w.(membership.Registration).Registered():
		c.Fatalf("Registered is closed though the agent never registered")
	default:
	}
}

func (s *workerSuite) TestRegistrationTimesOutOnTheClock(c *gc.C) {
	s.store.register = func(ctx context.Context) (int64, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	w, err := membership.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	s.expect(c, "register")
	c.Assert(s.clock.WaitAdvance(s.config.Timeout, testkit.LongWait, 1), gc.IsNil)
	err = workertest.CheckKilled(c, w)
	c.Check(err, gc.ErrorMatches, `register agent agent-a: context canceled \(timed out after 10s\)`)
}

func (s *workerSuite) TestResignationIsBoundedByItsTimeout(c *gc.C) {
	s.store.resign = func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	w := s.start(c)
	w.Kill()
	resign := s.expect(c, "resign")
	c.Check(resign.ctxErr, gc.IsNil)
	// The heartbeat and prune timers, and the resignation's timeout.
	c.Assert(s.clock.WaitAdvance(s.config.ResignTimeout, testkit.LongWait, 3), gc.IsNil)
	c.Check(workertest.CheckKilled(c, w), gc.IsNil)
	c.Check(s.logs.String(), gc.Matches, `(?s).*resigning failed.*timed out after 5s.*`)
}

func (s *workerSuite) TestPrunesDeadAgentsHourly(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Assert(s.clock.WaitAdvance(s.config.PruneInterval, testkit.LongWait, 2), gc.IsNil)
	// The heartbeat is due as well; the two run in either order.
	seen := map[string]time.Duration{}
	for range 3 {
		select {
		case got := <-s.store.calls:
			seen[got.method] = got.d
		case <-time.After(testkit.LongWait):
			c.Fatalf("calls after an hour: %v; want a prune, a heartbeat and a listing", seen)
		}
	}
	c.Check(seen, gc.DeepEquals, map[string]time.Duration{"prune": 24 * time.Hour, "heartbeat": 0, "list": 15 * time.Second})
	c.Check(s.logs.String(), gc.Matches, `(?s).*"pruned dead agents" agents=1.*`)
}
