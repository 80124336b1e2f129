package leadership_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4/dependency"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/leadership"
)

type workerSuite struct {
	clock   *testclock.Clock
	store   *fakeStore
	metrics *fakeMetrics
	logs    *syncBuffer
	config  leadership.Config
}

var _ = gc.Suite(&workerSuite{})

// claimResult is one answer of the fake store to a claim.
type claimResult struct {
	leader string
	mine   bool
	err    error
}

// fakeStore answers each claim with the next of claims and records the calls.
type fakeStore struct {
	claims  chan claimResult
	calls   chan string
	session chan int64
}

func (f *fakeStore) ClaimLeadership(ctx context.Context, agentID string, session int64, ttl time.Duration) (string, bool, error) {
	f.calls <- "claim " + agentID
	f.session <- session
	r := <-f.claims
	return r.leader, r.mine, r.err
}

func (f *fakeStore) ResignLeadership(ctx context.Context, agentID string, session int64) error {
	f.calls <- "resign " + agentID
	f.session <- session
	return nil
}

type fakeRegistration int64

func (r fakeRegistration) Session() int64 { return int64(r) }

func (r fakeRegistration) Registered() <-chan struct{} {
	done := make(chan struct{})
	if r != 0 {
		close(done)
	}
	return done
}

// fakeMetrics records every observation of the flag.
type fakeMetrics struct {
	mu      sync.Mutex
	leaders []bool
}

func (m *fakeMetrics) ObserveLeader(leader bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaders = append(m.leaders, leader)
}

func (m *fakeMetrics) observed() []bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]bool(nil), m.leaders...)
}

// syncBuffer is a log buffer safe for the worker's goroutine and the test's.
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
	s.clock = testclock.NewClock(time.Now())
	s.store = &fakeStore{claims: make(chan claimResult, 10), calls: make(chan string, 10), session: make(chan int64, 10)}
	s.metrics = &fakeMetrics{}
	s.logs = &syncBuffer{}
	s.config = leadership.Config{
		Store:        s.store,
		Registration: fakeRegistration(7),
		Clock:        s.clock,
		Logger:       slog.New(slog.NewTextHandler(s.logs, nil)),
		Metrics:      s.metrics,
		Settings: leadership.Settings{
			Agent:    domain.AgentIdentity{ID: "agent-a", TTL: 6 * time.Second},
			Interval: 2 * time.Second,
			Timeout:  time.Second,
		},
	}
}

func (s *workerSuite) expectCall(c *gc.C, want string) {
	select {
	case got := <-s.store.calls:
		c.Check(got, gc.Equals, want)
		c.Check(<-s.store.session, gc.Equals, int64(7))
	case <-time.After(testkit.LongWait):
		c.Fatalf("timed out waiting for %q", want)
	}
}

func (s *workerSuite) expectNoCall(c *gc.C) {
	select {
	case got := <-s.store.calls:
		c.Fatalf("unexpected call %q", got)
	default:
	}
}

func (s *workerSuite) start(c *gc.C, first claimResult) *leadership.Worker {
	s.store.claims <- first
	w, err := leadership.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	s.expectCall(c, "claim agent-a")
	return w
}

// advance moves the clock to the next claim and answers it with r.
func (s *workerSuite) advance(c *gc.C, r claimResult) {
	s.store.claims <- r
	c.Assert(s.clock.WaitAdvance(s.config.Interval, testkit.LongWait, 1), gc.IsNil)
	s.expectCall(c, "claim agent-a")
}

func (s *workerSuite) TestLeaderRenewsAndResignsOnStop(c *gc.C) {
	w := s.start(c, claimResult{leader: "agent-a", mine: true})
	c.Check(w.Check(), gc.Equals, true)
	c.Check(s.logs.String(), gc.Matches, `(?s).*leadership gained.*previous-leader="".*`)
	s.advance(c, claimResult{leader: "agent-a", mine: true})
	s.advance(c, claimResult{leader: "agent-a", mine: true})
	report := w.Report()
	c.Check(report["leader"], gc.Equals, "agent-a")
	c.Check(report["mine"], gc.Equals, true)
	workertest.CleanKill(c, w)
	s.expectCall(c, "resign agent-a")
	c.Check(s.metrics.observed(), gc.DeepEquals, []bool{true, false})
}

func (s *workerSuite) TestFollowerDoesNotResign(c *gc.C) {
	w := s.start(c, claimResult{leader: "agent-b"})
	c.Check(w.Check(), gc.Equals, false)
	s.advance(c, claimResult{leader: "agent-c"})
	testkit.Eventually(c, testkit.Holds("the move logged", func() bool { return strings.Contains(s.logs.String(), "leadership moved") }))
	c.Check(s.logs.String(), gc.Matches, `(?s).*leadership moved.*leader=agent-c previous-leader=agent-b.*`)
	c.Check(w.Leader(), gc.Equals, "agent-c")
	workertest.CleanKill(c, w)
	s.expectNoCall(c)
	c.Check(s.metrics.observed(), gc.DeepEquals, []bool{false})
}

func (s *workerSuite) TestGainingLeadershipBounces(c *gc.C) {
	w := s.start(c, claimResult{leader: "agent-b"})
	s.advance(c, claimResult{leader: "agent-a", mine: true})
	err := workertest.CheckKilled(c, w)
	c.Check(errors.Is(err, dependency.ErrBounce), gc.Equals, true)
	c.Check(w.Leader(), gc.Equals, "agent-b", gc.Commentf("the next worker names the holder seen before"))

	// The next worker starts as leader and names the previous holder.
	s.config.Previous = w.Leader()
	next := s.start(c, claimResult{leader: "agent-a", mine: true})
	defer workertest.CleanKill(c, next)
	c.Check(next.Check(), gc.Equals, true)
	c.Check(s.logs.String(), gc.Matches, `(?s).*leadership gained.*previous-leader=agent-b.*`)
}

func (s *workerSuite) TestLosingLeadershipBounces(c *gc.C) {
	w := s.start(c, claimResult{leader: "agent-a", mine: true})
	s.advance(c, claimResult{leader: "agent-b"})
	err := workertest.CheckKilled(c, w)
	c.Check(errors.Is(err, dependency.ErrBounce), gc.Equals, true)
	s.expectNoCall(c) // another agent holds it: nothing to resign

	s.config.Previous = w.Leader()
	next := s.start(c, claimResult{leader: "agent-b"})
	defer workertest.CleanKill(c, next)
	c.Check(next.Check(), gc.Equals, false)
	c.Check(s.logs.String(), gc.Matches, `(?s).*leadership lost.*leader=agent-b.*`)
}

func (s *workerSuite) TestLeaderWhoseClaimsFailForTheTTLGivesUp(c *gc.C) {
	w := s.start(c, claimResult{leader: "agent-a", mine: true})
	failed := claimResult{err: errors.New("connection refused")}
	s.advance(c, failed)
	s.advance(c, failed)
	testkit.Eventually(c, testkit.Holds("the failed claim reported", func() bool { return w.Report()["claim-error"] == "connection refused" }))
	workertest.CheckAlive(c, w)
	s.advance(c, failed) // 6s since the last claim that held
	err := workertest.CheckKilled(c, w)
	c.Check(errors.Is(err, dependency.ErrBounce), gc.Equals, true)
	c.Check(s.logs.String(), gc.Matches, `(?s).*leadership lost: no claim has held it.*`)
}

func (s *workerSuite) TestFailedFirstClaimStartsAsFollower(c *gc.C) {
	w := s.start(c, claimResult{err: errors.New("connection refused")})
	c.Check(w.Check(), gc.Equals, false)
	s.advance(c, claimResult{leader: "agent-a", mine: true})
	err := workertest.CheckKilled(c, w)
	c.Check(errors.Is(err, dependency.ErrBounce), gc.Equals, true)
}

func (s *workerSuite) TestClaimsTheMomentTheAgentHasRegistered(c *gc.C) {
	reg := newSettableRegistration()
	s.config.Registration = reg
	w, err := leadership.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	c.Check(w.Check(), gc.Equals, false)
	c.Check(w.Report()["claim-error"], gc.Equals, "the agent is not registered yet")
	s.expectNoCall(c)

	// The claim follows the registration without the clock moving: an agent that starts
	// leads (and samples capacity) at once, not an Interval later.
	s.store.claims <- claimResult{leader: "agent-a", mine: true}
	reg.set(7)
	s.expectCall(c, "claim agent-a")
	err = workertest.CheckKilled(c, w)
	c.Check(errors.Is(err, dependency.ErrBounce), gc.Equals, true)
}

// settableRegistration is an agent that registers while the test runs.
type settableRegistration struct {
	mu         sync.Mutex
	session    int64
	registered chan struct{}
}

func newSettableRegistration() *settableRegistration {
	return &settableRegistration{registered: make(chan struct{})}
}

func (r *settableRegistration) set(session int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.session = session
	close(r.registered)
}

func (r *settableRegistration) Registered() <-chan struct{} { return r.registered }

func (r *settableRegistration) Session() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.session
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*leadership.Config)
		field  string
	}{
		{func(cfg *leadership.Config) { cfg.Store = nil }, "Store"},
		{func(cfg *leadership.Config) { cfg.Registration = nil }, "Registration"},
		{func(cfg *leadership.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *leadership.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *leadership.Config) { cfg.Metrics = nil }, "Metrics"},
		{func(cfg *leadership.Config) { cfg.Agent.ID = "" }, "agent ID .*--agent-id"},
		{func(cfg *leadership.Config) { cfg.Interval = 0 }, "Interval 0s"},
		{func(cfg *leadership.Config) { cfg.Agent.TTL = 3 * time.Second }, `Agent.TTL 3s \(must be at least twice Interval 2s\)`},
		{func(cfg *leadership.Config) { cfg.Timeout = 0 }, "Timeout 0s"},
	} {
		config := s.config
		t.mutate(&config)
		w, err := leadership.NewWorker(config)
		c.Check(w, gc.IsNil)
		testkit.CheckNotValid(c, err, t.field)
	}
	s.expectNoCall(c)
}
