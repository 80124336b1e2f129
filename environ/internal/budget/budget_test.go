package budget_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	jujuerrors "github.com/juju/errors"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ/internal/budget"
)

// storeFunc is a Store made of a function.
type storeFunc func(ctx context.Context, draw domain.BudgetDraw) (domain.BudgetGrant, error)

func (f storeFunc) DrawBudget(ctx context.Context, draw domain.BudgetDraw) (domain.BudgetGrant, error) {
	return f(ctx, draw)
}

// bucket is an in-memory bucket on a test clock, counting its draws.
type bucket struct {
	mu      sync.Mutex
	clock   *testclock.Clock
	tokens  float64
	at      time.Time
	draws   []domain.BudgetDraw
	granted int
}

func newBucket(clk *testclock.Clock, tokens float64) *bucket {
	return &bucket{clock: clk, tokens: tokens, at: clk.Now()}
}

func (b *bucket) DrawBudget(_ context.Context, draw domain.BudgetDraw) (domain.BudgetGrant, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.tokens = min(float64(draw.Burst), b.tokens+draw.Rate*now.Sub(b.at).Seconds())
	b.at = now
	g := min(draw.Want, int(b.tokens))
	b.tokens -= float64(g)
	b.draws = append(b.draws, draw)
	b.granted += g
	return domain.BudgetGrant{Granted: g, Left: b.tokens}, nil
}

func (b *bucket) drawn() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.draws), b.granted
}

func config(store budget.Store, clk *testclock.Clock) budget.Config {
	return budget.Config{
		Provisioner: "k8s", Rate: 20, Burst: 40, Store: store, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func newLimiter(t *testing.T, cfg budget.Config) *budget.Limiter {
	t.Helper()
	l, err := budget.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestConfigValidate(t *testing.T) {
	clk := testclock.NewClock(time.Now())
	for _, tc := range []struct {
		field  string
		mutate func(*budget.Config)
	}{
		{"Provisioner", func(c *budget.Config) { c.Provisioner = "" }},
		{"Rate", func(c *budget.Config) { c.Rate = 0 }},
		{"Rate", func(c *budget.Config) { c.Rate = -1 }},
		{"Burst", func(c *budget.Config) { c.Burst = 0 }},
		{"Store", func(c *budget.Config) { c.Store = nil }},
		{"Clock", func(c *budget.Config) { c.Clock = nil }},
		{"Logger", func(c *budget.Config) { c.Logger = nil }},
	} {
		cfg := config(newBucket(clk, 0), clk)
		tc.mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, jujuerrors.NotValid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("config without a valid %s: %v; want a not-valid error naming it", tc.field, err)
		}
		if _, err := budget.New(cfg); err == nil {
			t.Errorf("New accepts a config without a valid %s", tc.field)
		}
	}
	if err := config(newBucket(clk, 0), clk).Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func TestChunkSize(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		burst int
		want  int
	}{
		{20, 40, 2},       // a tenth of the rate
		{200, 400, 20},    // a tenth of the rate
		{200, 20, 5},      // a quarter of the burst
		{0.5, 1, 1},       // at least 1
		{1000, 1, 1},      // at least 1, whatever the burst
		{15, 1000, 2},     // a tenth of the rate, rounded up
		{1e6, 1e6, 1e5},   // the largest budget
		{3, 1_000_000, 1}, // a slow budget
	} {
		if got := budget.ChunkSize(tc.rate, tc.burst); got != tc.want {
			t.Errorf("ChunkSize(%v, %d) = %d, want %d", tc.rate, tc.burst, got, tc.want)
		}
	}
}

// Waiting callers share draws: a draw asks for a token per caller waiting, up to a chunk,
// and tokens left from a draw are handed out without another.
func TestWaitDrawsInChunks(t *testing.T) {
	clk := testclock.NewClock(time.Now())
	b := newBucket(clk, 41)
	cfg := config(b, clk)
	cfg.Burst = 100
	l := newLimiter(t, cfg)
	ctx := context.Background()
	if err := l.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if draws, granted := b.drawn(); draws != 1 || granted != 1 || b.draws[0].Want != 1 {
		t.Fatalf("one caller: %d draws granting %d (%+v); want one draw of 1", draws, granted, b.draws)
	}
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Wait(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	draws, granted := b.drawn()
	if granted != 41 {
		t.Fatalf("41 callers were granted %d tokens; want 41", granted)
	}
	for _, d := range b.draws {
		if d.Want < 1 || d.Want > 2 || d.Rate != 20 || d.Burst != 100 || d.Provisioner != "k8s" {
			t.Fatalf("draw %+v: want the spec's rate, burst and provisioner, and 1 or 2 tokens (a chunk)", d)
		}
	}
	if draws > 41 {
		t.Fatalf("%d draws for 41 tokens", draws)
	}
	r := l.Report()
	if r["tokens-held"] != 0 || r["draws"] != int64(draws) || r["tokens-granted"] != int64(41) || r["chunk"] != 2 || r["burst"] != 100 || r["requests-per-second"] != 20.0 {
		t.Errorf("report %v", r)
	}
}

// A caller that finds the bucket short waits, on the clock, until it should hold what the
// caller misses, and is never handed a token before the bucket has it.
func TestShortBucketWaitsForTheRefill(t *testing.T) {
	clk := testclock.NewClock(time.Now())
	b := newBucket(clk, 0)
	l := newLimiter(t, config(b, clk))
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background()) }()
	// The draw found none of the one token it asked for: at 20/s, one takes 50ms.
	if err := clk.WaitAdvance(49*time.Millisecond, time.Second, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Wait ended (%v) before the bucket held a token", err)
	default:
	}
	if err := clk.WaitAdvance(time.Millisecond, time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if draws, granted := b.drawn(); granted != 1 || draws != 2 {
		t.Fatalf("%d draws granted %d; want the empty draw, then one granting 1", draws, granted)
	}
	if r := l.Report(); r["waits"] != int64(1) || r["wait-seconds-total"] != 0.05 {
		t.Errorf("report %v; want one wait of 50ms", r)
	}
}

// A wait ends with the caller's context: its error, and no token taken.
func TestWaitEndsWithTheContext(t *testing.T) {
	clk := testclock.NewClock(time.Now())
	b := newBucket(clk, 0)
	l := newLimiter(t, config(b, clk))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	if err := clk.WaitAdvance(0, time.Second, 1); err != nil { // waiting on the clock
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after its context ended: %v; want context.Canceled", err)
	}
	if err := l.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context: %v; want context.Canceled", err)
	}
}

// A failed draw is retried after RetryDelay; callers wait meanwhile, and the report shows
// the error.
func TestFailedDrawIsRetried(t *testing.T) {
	clk := testclock.NewClock(time.Now())
	var mu sync.Mutex
	calls := 0
	store := storeFunc(func(_ context.Context, draw domain.BudgetDraw) (domain.BudgetGrant, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return domain.BudgetGrant{}, errors.New("connection refused")
		}
		return domain.BudgetGrant{Granted: draw.Want}, nil
	})
	logs := &strings.Builder{}
	var logsMu sync.Mutex
	cfg := config(store, clk)
	cfg.Logger = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logsMu.Lock()
		defer logsMu.Unlock()
		return logs.Write(p)
	}), nil))
	l := newLimiter(t, cfg)
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background()) }()
	if err := clk.WaitAdvance(budget.RetryDelay, time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	logsMu.Lock()
	logged := logs.String()
	logsMu.Unlock()
	if !strings.Contains(logged, `level=WARN msg="drawing from the shared rate budget failed`) || !strings.Contains(logged, "connection refused") ||
		!strings.Contains(logged, `level=INFO msg="drawing from the shared rate budget works again"`) {
		t.Errorf("logs:\n%s\nwant the failure once, then the recovery", logged)
	}
	if r := l.Report(); !strings.Contains(r["last-draw-error"].(string), "connection refused") || r["draws"] != int64(1) {
		t.Errorf("report %v; want the failed draw's error and one draw", r)
	}
}

// observer records what a Limiter reports.
type observer struct {
	mu     sync.Mutex
	waited time.Duration
	draws  int
	held   []int
}

func (o *observer) ObserveBudgetWait(p string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waited += d
}

func (o *observer) ObserveBudgetDraw(p string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.draws++
}

func (o *observer) ObserveBudgetTokens(p string, held int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.held = append(o.held, held)
}

func TestObserverSeesWaitsDrawsAndTokens(t *testing.T) {
	clk := testclock.NewClock(time.Now())
	o := &observer{}
	cfg := config(newBucket(clk, 0), clk)
	cfg.Observer = o
	l := newLimiter(t, cfg)
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background()) }()
	if err := clk.WaitAdvance(50*time.Millisecond, time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.draws != 2 || o.waited != 50*time.Millisecond || len(o.held) == 0 || o.held[len(o.held)-1] != 0 {
		t.Errorf("observed %d draws, %v waited, tokens held %v; want 2 draws, 50ms, the last held 0", o.draws, o.waited, o.held)
	}
}

// Each short draw makes the next wait longer: its patience doubles, up to a bound, and the
// wait stays under half the time the bucket takes to fill.
func TestShortDrawsGrowPatience(t *testing.T) {
	// At 20/s a token takes 50ms: the waits are 50ms, 100ms, 200ms, then 400ms however
	// many short draws follow (the patience of 8); with a burst of 4, which fills in
	// 200ms, at most 100ms.
	shortDraws(t, 40, []time.Duration{50, 100, 200, 400, 400, 400})
	shortDraws(t, 4, []time.Duration{50, 100, 100, 100})
}

// shortDraws checks the waits between the draws of a Limiter at 20/s with burst whose
// every draw comes back empty.
func shortDraws(t *testing.T, burst int, want []time.Duration) {
	t.Helper()
	clk := testclock.NewClock(time.Now())
	var mu sync.Mutex
	var at []time.Time
	empty := storeFunc(func(context.Context, domain.BudgetDraw) (domain.BudgetGrant, error) {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, clk.Now())
		return domain.BudgetGrant{}, nil
	})
	cfg := config(empty, clk)
	cfg.Burst = burst
	l := newLimiter(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	for {
		mu.Lock()
		n := len(at)
		mu.Unlock()
		if n > len(want) {
			break
		}
		if err := clk.WaitAdvance(10*time.Millisecond, time.Second, 1); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, w := range want {
		if got := at[i+1].Sub(at[i]); got != w*time.Millisecond {
			t.Errorf("burst %d: wait %d after a short draw: %v, want %v", burst, i+1, got, w*time.Millisecond)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A full draw makes the patience one less: a Limiter on a contended bucket stays patient.
func TestFullDrawLowersPatienceByOne(t *testing.T) {
	clk := testclock.NewClock(time.Now())
	var mu sync.Mutex
	draws := 0
	store := storeFunc(func(_ context.Context, draw domain.BudgetDraw) (domain.BudgetGrant, error) {
		mu.Lock()
		defer mu.Unlock()
		draws++
		if draws <= 4 {
			return domain.BudgetGrant{}, nil
		}
		return domain.BudgetGrant{Granted: draw.Want}, nil
	})
	l := newLimiter(t, config(store, clk))
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background()) }()
	for _, wait := range []time.Duration{50, 100, 200, 400} {
		if err := clk.WaitAdvance(wait*time.Millisecond, time.Second, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := l.Report(); r["patience"] != 7 {
		t.Errorf("patience after four short draws and a full one: %v, want 7 (8 less 1)", r["patience"])
	}
}
