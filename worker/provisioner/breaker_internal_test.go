package provisioner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock"
	"github.com/juju/clock/testclock"
	jujuerrors "github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// fakeBreakerStore keeps breakers as the stores do (domain.Breaker's transitions), on its
// clock, which is the database's.
type fakeBreakerStore struct {
	clock clock.Clock

	mu    sync.Mutex
	rows  map[string]domain.Breaker
	lists int // ListBreakers calls
}

func newFakeBreakerStore(clk clock.Clock) *fakeBreakerStore {
	return &fakeBreakerStore{clock: clk, rows: make(map[string]domain.Breaker)}
}

func (s *fakeBreakerStore) change(provisioner string, f func(domain.Breaker) (domain.Breaker, bool)) domain.Breaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.rows[provisioner]
	if !ok {
		b = domain.Breaker{Provisioner: provisioner, State: domain.BreakerClosed}
	}
	b.Now = s.clock.Now()
	b, changed := f(b)
	if changed || !ok {
		s.rows[provisioner] = b
	}
	return b
}

func (s *fakeBreakerStore) RecordBrokerFailure(_ context.Context, provisioner string, f domain.BrokerFailure) (domain.Breaker, error) {
	return s.change(provisioner, func(b domain.Breaker) (domain.Breaker, bool) { return b.Failed(b.Now, f), true }), nil
}

func (s *fakeBreakerStore) RecordBrokerSuccess(_ context.Context, provisioner string) (domain.Breaker, error) {
	return s.change(provisioner, func(b domain.Breaker) (domain.Breaker, bool) { return b.Succeeded(), true }), nil
}

func (s *fakeBreakerStore) TakeBrokerProbe(_ context.Context, provisioner, holder string, lease time.Duration) (domain.Breaker, bool, error) {
	var ok bool
	b := s.change(provisioner, func(b domain.Breaker) (domain.Breaker, bool) {
		b, ok = b.Probe(b.Now, holder, lease)
		return b, ok
	})
	return b, ok, nil
}

func (s *fakeBreakerStore) ListBreakers(context.Context) ([]domain.Breaker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	var out []domain.Breaker
	for _, b := range s.rows {
		b.Now = s.clock.Now()
		out = append(out, b)
	}
	return out, nil
}

// fakeBreakerMetrics records what the breakers report.
type fakeBreakerMetrics struct {
	mu       sync.Mutex
	state    map[string]domain.BreakerState
	opens    int
	failures map[string]int
}

func (m *fakeBreakerMetrics) ObserveBreakerState(p string, s domain.BreakerState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state[p] = s
}

func (m *fakeBreakerMetrics) ObserveBreakerOpened(string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opens++
}

func (m *fakeBreakerMetrics) ObserveBrokerFailure(_, class string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failures[class]++
}

var testBreakerSettings = domain.BreakerSettings{Failures: 3, Window: 30 * time.Second, OpenFor: 10 * time.Second, MaxOpenFor: time.Minute}

// newTestBreakers is agent holder's breakers on store, with kube's breaker on and off's off.
func newTestBreakers(store BreakerStore, clk clock.Clock, holder string) (*breakers, *fakeBreakerMetrics) {
	m := &fakeBreakerMetrics{state: map[string]domain.BreakerState{}, failures: map[string]int{}}
	settings := func(p string) (domain.BreakerSettings, bool) { return testBreakerSettings, p != "off" }
	return newBreakers(BreakerConfig{Store: store, Settings: settings, Metrics: m}, clk, holder,
		slog.New(slog.NewTextHandler(io.Discard, nil))), m
}

func unavailable503() error {
	return environ.Unavailable(errors.New("the server is currently unable to handle the request"),
		environ.UnavailableServer, "503 Service Unavailable from the API server", 0)
}

func TestBreakersOpenWaitProbeAndClose(t *testing.T) {
	ctx := context.Background()
	clk := testclock.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	store := newFakeBreakerStore(clk)
	b, m := newTestBreakers(store, clk, "agent-a")

	if w := b.admit(ctx, "kube", "r1"); w != nil {
		t.Fatalf("a closed breaker makes r1 wait: %v", w)
	}
	// Two failures count; the third opens the breaker, and the resource waits.
	for range 2 {
		if err, _ := b.answered(ctx, "kube", "r1", unavailable503()); errors.As(err, new(*brokerWait)) {
			t.Fatalf("a failure below the threshold waits: %v", err)
		}
	}
	err, _ := b.answered(ctx, "kube", "r1", unavailable503())
	var w *brokerWait
	if !errors.As(err, &w) {
		t.Fatalf("the third failure: %v; want a wait", err)
	}
	if _, ok := environ.IsUnavailable(err); !ok || err.Error() != "the server is currently unable to handle the request" {
		t.Errorf("the wait hides the broker's failure: %v", err)
	}
	wantMessage := "broker unavailable: 503 Service Unavailable from the API server, 3 failures in 30s; next probe at 2026-01-01T12:00:10Z"
	if w.retryIn != 10*time.Second || w.message != wantMessage {
		t.Errorf("wait = %s %q; want 10s %q", w.retryIn, w.message, wantMessage)
	}
	if m.opens != 1 || m.failures["unavailable"] != 3 || m.state["kube"] != domain.BreakerOpen {
		t.Errorf("metrics: %d opens, failures %v, state %s", m.opens, m.failures, m.state["kube"])
	}

	// Other resources of the provisioner wait too, without calling the store each time.
	lists := store.lists
	clk.Advance(4 * time.Second)
	if w := b.admit(ctx, "kube", "r2"); w == nil || w.retryIn != 6*time.Second {
		t.Fatalf("r2 while open: %+v; want a wait of 6s", w)
	}
	clk.Advance(500 * time.Millisecond)
	b.admit(ctx, "kube", "r3")
	if store.lists != lists+1 {
		t.Errorf("%d reads of the breakers for two admits within a second; want 1", store.lists-lists)
	}
	// Another provisioner, and one whose breaker is off, go on.
	if w := b.admit(ctx, "pool", "p1"); w != nil {
		t.Errorf("another provisioner waits: %v", w)
	}
	if err, _ := b.answered(ctx, "off", "o1", unavailable503()); errors.As(err, new(*brokerWait)) {
		t.Errorf("a provisioner whose breaker is off waits: %v", err)
	}

	// The next probe is due: the first attempt to ask takes it, the others wait for it.
	clk.Advance(6 * time.Second)
	if w := b.admit(ctx, "kube", "r2"); w != nil {
		t.Fatalf("r2 at the next probe: %v; want the probe", w)
	}
	if w := b.admit(ctx, "kube", "r3"); w == nil {
		t.Fatal("r3 calls the broker while r2 probes it")
	}
	if w := b.admit(ctx, "kube", "r2"); w != nil {
		t.Fatalf("r2 lost its own probe: %v", w)
	}
	// The probe fails: open again for twice as long.
	err, _ = b.answered(ctx, "kube", "r2", unavailable503())
	if !errors.As(err, &w) || w.retryIn != 20*time.Second {
		t.Fatalf("the probe failed: %v; want a wait of 20s", err)
	}
	clk.Advance(20 * time.Second)
	if w := b.admit(ctx, "kube", "r3"); w != nil {
		t.Fatalf("r3 at the second probe: %v", w)
	}
	// The probe's success closes the breaker; everything goes on.
	if _, closed := b.answered(ctx, "kube", "r3", nil); !closed {
		t.Fatal("the probe's success did not close the breaker")
	}
	if w := b.admit(ctx, "kube", "r1"); w != nil {
		t.Fatalf("r1 after the breaker closed: %v", w)
	}
	if got := b.report()["kube"].(map[string]any)["state"]; got != "closed" {
		t.Errorf("report: %v", b.report())
	}
}

func TestBreakersGiveOneProbeAcrossAgents(t *testing.T) {
	ctx := context.Background()
	clk := testclock.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	store := newFakeBreakerStore(clk)
	a, _ := newTestBreakers(store, clk, "agent-a")
	b, _ := newTestBreakers(store, clk, "agent-b")
	for range 3 {
		a.answered(ctx, "kube", "r1", unavailable503())
	}
	// Agent b reads the breaker open: it does not call the broker either.
	if w := b.admit(ctx, "kube", "r9"); w == nil || !strings.HasPrefix(w.message, "broker unavailable: 503") {
		t.Fatalf("agent b while agent a's failures opened the breaker: %+v", w)
	}
	clk.Advance(10 * time.Second)
	if w := b.admit(ctx, "kube", "r9"); w != nil {
		t.Fatalf("agent b at the next probe: %v; want the probe", w)
	}
	w := a.admit(ctx, "kube", "r1")
	if w == nil {
		t.Fatal("agent a calls the broker while agent b probes it")
	}
	if w.retryIn != 10*time.Second {
		t.Errorf("agent a waits %s for b's probe; want OpenFor (10s), the probe's hold being longer", w.retryIn)
	}
	// Agent b goes away: once its probe's hold ends, agent a takes the probe.
	clk.Advance(breakerProbeLease)
	if w := a.admit(ctx, "kube", "r1"); w != nil {
		t.Fatalf("agent a after b's probe's hold ended: %v", w)
	}
	if _, closed := a.answered(ctx, "kube", "r1", errors.New("deployment r1 not ready within 5m")); !closed {
		t.Error("a failure that is not the broker's did not close the breaker: the broker answered")
	}
}

// TestBreakersFollowAProbeAnotherAgentClosed: an agent whose view still says open finds, when
// it asks for the due probe, that another agent's probe closed the breaker: it calls the
// broker rather than make the resource wait.
func TestBreakersFollowAProbeAnotherAgentClosed(t *testing.T) {
	ctx := context.Background()
	clk := testclock.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	store := newFakeBreakerStore(clk)
	a, _ := newTestBreakers(store, clk, "agent-a")
	b, _ := newTestBreakers(store, clk, "agent-b")
	for range 3 {
		a.answered(ctx, "kube", "r1", unavailable503())
	}
	if w := b.admit(ctx, "kube", "r9"); w == nil {
		t.Fatal("agent b called a broker whose breaker is open")
	}
	clk.Advance(10 * time.Second)
	if w := a.admit(ctx, "kube", "r1"); w != nil {
		t.Fatalf("agent a at the next probe: %v; want the probe", w)
	}
	if _, closed := a.answered(ctx, "kube", "r1", nil); !closed {
		t.Fatal("the probe's success did not close the breaker")
	}
	// Agent b read the breaker under a second ago: its view says open, and the probe due.
	clk.Advance(breakerRefresh / 2)
	b.readAt = clk.Now()
	if w := b.admit(ctx, "kube", "r9"); w != nil {
		t.Errorf("agent b after agent a's probe closed the breaker: %v; want the broker called", w)
	}
}

func TestBrokerUnavailableKeepsTheStatusAndTheAttempts(t *testing.T) {
	w := &brokerWait{message: "broker unavailable: x, 5 failures in 30s; next probe at T", retryIn: 7 * time.Second}
	for _, tc := range []struct {
		name        string
		f           failure
		wantStatus  domain.Status
		wantMessage string
		still       bool
	}{
		{"pending stays pending", failure{status: domain.StatusPending, reason: domain.ReasonCreated, attempts: 2}, domain.StatusPending, w.message, false},
		{"provisioning stays", failure{status: domain.StatusProvisioning, reason: domain.ReasonProvisioning}, domain.StatusProvisioning, w.message, false},
		{"deleting stays", failure{status: domain.StatusDeleting, reason: domain.ReasonDeleteRequested}, domain.StatusDeleting, w.message, false},
		{"a resize of a serving one keeps it serving", failure{status: domain.StatusReady, reason: domain.ReasonAvailable, serving: true, observed: 3},
			domain.StatusReady, w.message + "; serving generation 3 meanwhile", false},
		{"a serving one's wait that goes on keeps its message", failure{status: domain.StatusReady, reason: domain.ReasonBrokerUnavailable, serving: true, observed: 3,
			message: "broker unavailable: earlier; serving generation 3 meanwhile"}, domain.StatusReady, "broker unavailable: earlier; serving generation 3 meanwhile", true},
		{"a ready one not serving provisions", failure{status: domain.StatusReady, reason: domain.ReasonAvailable}, domain.StatusProvisioning, w.message, false},
		{"a hibernate of a ready one hibernates", failure{status: domain.StatusReady, reason: domain.ReasonAvailable, hibernating: true, serving: true}, domain.StatusHibernating, w.message, false},
		{"a wait that goes on keeps its message", failure{status: domain.StatusPending, reason: domain.ReasonBrokerUnavailable, message: "broker unavailable: earlier"}, domain.StatusPending, "broker unavailable: earlier", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.kind, tc.f.wait, tc.f.err = failedBrokerUnavailable, w, w
			d := retryPolicy{base: time.Second, max: time.Minute, capacityRetry: time.Minute, rand: func() float64 { return 0.5 }}.decide(tc.f, time.Now())
			if d.status != tc.wantStatus || d.reason != domain.ReasonBrokerUnavailable || d.message != tc.wantMessage ||
				d.attempts != tc.f.attempts || d.retryIn != 7*time.Second || d.stillWaiting != tc.still || d.outcome != OutcomeBrokerUnavailable {
				t.Errorf("decision %+v", d)
			}
		})
	}
}

// NewFakeBreakerStore is a BreakerStore on clk that keeps the stores' rules, for the
// worker's tests.
func NewFakeBreakerStore(clk clock.Clock) BreakerStore { return newFakeBreakerStore(clk) }

// NewFakeBreakerMetrics is a BreakerMetrics that keeps nothing, for the worker's tests.
func NewFakeBreakerMetrics() BreakerMetrics {
	return &fakeBreakerMetrics{state: map[string]domain.BreakerState{}, failures: map[string]int{}}
}

// A call the attempt's own end cut short got no answer: it neither closes the breaker nor
// counts as a failure, and the probe it was ends with its hold.
func TestBreakersIgnoreACallCutShort(t *testing.T) {
	ctx := context.Background()
	clk := testclock.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	store := newFakeBreakerStore(clk)
	b, _ := newTestBreakers(store, clk, "agent-a")
	for range 3 {
		b.answered(ctx, "kube", "r1", unavailable503())
	}
	clk.Advance(10 * time.Second)
	if w := b.admit(ctx, "kube", "r1"); w != nil {
		t.Fatalf("r1 at the next probe: %v", w)
	}
	cut := fmt.Errorf("apply deployment: %w", context.DeadlineExceeded)
	if err, closed := b.answered(ctx, "kube", "r1", cut); closed || err != cut {
		t.Fatalf("a call cut short: %v, closed %v; want it as it was, the breaker not closed", err, closed)
	}
	if got := store.rows["kube"]; got.State != domain.BreakerHalfOpen || got.Failures != 3 {
		t.Errorf("breaker after a call cut short: %+v; want half-open with 3 failures", got)
	}
}

func TestBreakerConfigIsWholeOrNone(t *testing.T) {
	clk := testclock.NewClock(time.Now())
	_, m := newTestBreakers(newFakeBreakerStore(clk), clk, "a")
	settings := func(string) (domain.BreakerSettings, bool) { return testBreakerSettings, true }
	for _, tc := range []struct {
		config BreakerConfig
		want   string // "" for valid
	}{
		{BreakerConfig{}, ""},
		{BreakerConfig{Store: newFakeBreakerStore(clk), Settings: settings, Metrics: m}, ""},
		{BreakerConfig{Settings: settings, Metrics: m}, "Breakers without a Store"},
		{BreakerConfig{Store: newFakeBreakerStore(clk), Metrics: m}, "Breakers without Settings"},
		{BreakerConfig{Store: newFakeBreakerStore(clk), Settings: settings}, "Breakers without Metrics"},
	} {
		err := tc.config.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.config, err)
		case tc.want != "" && (!jujuerrors.Is(err, jujuerrors.NotValid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("want NotValid %q, got %v", tc.want, err)
		}
	}
}

// blockingBreakerStore is a breaker store whose reads wait for release once armed.
type blockingBreakerStore struct {
	*fakeBreakerStore
	armed   chan struct{} // closed: reads block
	reading chan struct{} // receives when a blocked read starts
	release chan struct{}
}

func (s *blockingBreakerStore) ListBreakers(ctx context.Context) ([]domain.Breaker, error) {
	select {
	case <-s.armed:
		s.reading <- struct{}{}
		<-s.release
	default:
	}
	return s.fakeBreakerStore.ListBreakers(ctx)
}

// TestBreakersReadTheStoreOutsideTheLock: while one attempt's refresh waits for the store,
// the others decide from the views they have, instead of queueing behind it.
func TestBreakersReadTheStoreOutsideTheLock(t *testing.T) {
	ctx := context.Background()
	clk := testclock.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	store := &blockingBreakerStore{fakeBreakerStore: newFakeBreakerStore(clk),
		armed: make(chan struct{}), reading: make(chan struct{}), release: make(chan struct{})}
	b, _ := newTestBreakers(store, clk, "agent-a")
	for range testBreakerSettings.Failures {
		b.answered(ctx, "kube", "r1", unavailable503())
	}
	if w := b.admit(ctx, "kube", "r2"); w == nil {
		t.Fatal("an open breaker admitted an attempt")
	}

	close(store.armed)
	clk.Advance(breakerRefresh)
	refreshed := make(chan *brokerWait)
	go func() { refreshed <- b.admit(ctx, "kube", "r3") }()
	<-store.reading
	// The refresh is under way: other attempts do not wait for it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		if w := b.admit(ctx, "pool", "p1"); w != nil {
			t.Errorf("a closed provisioner's attempt waited: %v", w)
		}
		if w := b.admit(ctx, "kube", "r4"); w == nil {
			t.Error("the open breaker admitted an attempt during a refresh")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("attempts waited for another attempt's read of the store")
	}
	close(store.release)
	if w := <-refreshed; w == nil {
		t.Error("the attempt that refreshed was admitted to an open breaker")
	}
}

// TestBreakersWaitForTheFirstRead: before the first read of the store no view is known, so
// attempts wait for it rather than call a broker another agent's breaker holds open.
func TestBreakersWaitForTheFirstRead(t *testing.T) {
	ctx := context.Background()
	clk := testclock.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	store := &blockingBreakerStore{fakeBreakerStore: newFakeBreakerStore(clk),
		armed: make(chan struct{}), reading: make(chan struct{}), release: make(chan struct{})}
	other, _ := newTestBreakers(store.fakeBreakerStore, clk, "agent-b")
	for range testBreakerSettings.Failures {
		other.answered(ctx, "kube", "r1", unavailable503())
	}
	b, _ := newTestBreakers(store, clk, "agent-a")
	close(store.armed)
	first := make(chan *brokerWait)
	go func() { first <- b.admit(ctx, "kube", "r2") }()
	<-store.reading
	second := make(chan *brokerWait)
	go func() { second <- b.admit(ctx, "kube", "r3") }()
	select {
	case w := <-second:
		t.Fatalf("an attempt decided before the first read: %v", w)
	case <-time.After(50 * time.Millisecond):
	}
	close(store.release)
	if w := <-first; w == nil {
		t.Error("the first read's attempt was admitted to an open breaker")
	}
	if w := <-second; w == nil {
		t.Error("an attempt waiting for the first read was admitted to an open breaker")
	}
}

// An attempt that provisions in one transaction takes a copy of the breakers younger than
// breakerStale as it is, and reads the store only after its write (catchUp), once the copy
// is breakerRefresh old; an older copy is read first. A provisioner whose breaker is off
// never reads the store.
func TestBreakersClosedReadsTheStoreAfterTheWrite(t *testing.T) {
	ctx := context.Background()
	clk := testclock.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	store := newFakeBreakerStore(clk)
	b, _ := newTestBreakers(store, clk, "agent-a")
	lists := func() int {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.lists
	}
	if !b.closed(ctx, "kube") || lists() != 1 {
		t.Fatalf("first closed: %d reads, want the first read", lists())
	}
	clk.Advance(breakerRefresh + time.Millisecond)
	// Another agent opens the breaker meanwhile.
	for range 3 {
		if _, err := store.RecordBrokerFailure(ctx, "kube", domain.BrokerFailure{Settings: testBreakerSettings, Error: "503"}); err != nil {
			t.Fatal(err)
		}
	}
	if !b.closed(ctx, "kube") || lists() != 1 {
		t.Errorf("closed on a copy %s old: %d reads; want the copy taken as it is", breakerRefresh, lists())
	}
	b.catchUp(ctx, "kube")
	if lists() != 2 {
		t.Errorf("catchUp on a copy %s old: %d reads, want 2", breakerRefresh, lists())
	}
	if b.closed(ctx, "kube") {
		t.Error("closed after catching up with an open breaker")
	}
	clk.Advance(breakerStale)
	b.closed(ctx, "kube")
	if lists() != 3 {
		t.Errorf("closed on a copy %s old: %d reads; want it read first", breakerStale, lists())
	}
	b.catchUp(ctx, "off")
	b.closed(ctx, "off")
	if lists() != 3 {
		t.Errorf("a provisioner whose breaker is off read the store: %d reads", lists())
	}
}
