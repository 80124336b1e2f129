package domain_test

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

func TestBreakerStateMachine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f := domain.BrokerFailure{
		Settings: domain.BreakerSettings{Failures: 3, Window: 30 * time.Second, OpenFor: 10 * time.Second, MaxOpenFor: 25 * time.Second},
		Error:    "429 Too Many Requests from the API server",
	}
	var b domain.Breaker
	b = b.Failed(t0, f).Failed(t0.Add(10*time.Second), f)
	if b.State != domain.BreakerClosed || b.Failures != 2 {
		t.Fatalf("two failures: %+v", b)
	}
	// The window passed: the count starts anew.
	b = b.Failed(t0.Add(31*time.Second), f)
	if b.State != domain.BreakerClosed || b.Failures != 1 || !b.WindowStartedAt.Equal(t0.Add(31*time.Second)) {
		t.Fatalf("a failure after the window: %+v; want a new window with one failure", b)
	}
	// A success while closed does not reset the count: at 30% failures the breaker opens.
	b = b.Succeeded().Failed(t0.Add(32*time.Second), f).Succeeded().Failed(t0.Add(33*time.Second), f)
	opened := t0.Add(33 * time.Second)
	if b.State != domain.BreakerOpen || b.OpenCount != 1 || !b.OpenedAt.Equal(opened) || !b.NextProbeAt.Equal(opened.Add(10*time.Second)) {
		t.Fatalf("three failures in the window: %+v; want open until +10s", b)
	}
	if _, ok := b.Probe(opened.Add(9*time.Second), "a", time.Minute); ok {
		t.Fatal("a probe before next_probe_at")
	}
	probeAt := opened.Add(10 * time.Second)
	b, ok := b.Probe(probeAt, "a", time.Minute)
	if !ok || b.State != domain.BreakerHalfOpen || b.ProbeHolder != "a" || !b.ProbeUntil.Equal(probeAt.Add(time.Minute)) {
		t.Fatalf("probe at next_probe_at: %v %+v", ok, b)
	}
	if _, ok := b.Probe(probeAt.Add(time.Second), "b", time.Minute); ok {
		t.Fatal("a second probe while the first is held")
	}
	if _, ok := b.Probe(probeAt.Add(time.Second), "a", time.Minute); !ok {
		t.Fatal("the holder lost its own probe")
	}
	// The probe fails: open for twice as long, then capped at MaxOpenFor.
	reopened := probeAt.Add(time.Second)
	b = b.Failed(reopened, f)
	if b.State != domain.BreakerOpen || b.OpenCount != 2 || !b.NextProbeAt.Equal(reopened.Add(20*time.Second)) || b.ProbeHolder != "" {
		t.Fatalf("the probe failed: %+v; want open for 20s", b)
	}
	b, _ = b.Probe(b.NextProbeAt, "b", time.Second)
	third := b.ProbeUntil
	b = b.Failed(third, f)
	if !b.NextProbeAt.Equal(third.Add(25 * time.Second)) {
		t.Fatalf("third open: next probe %s after, want MaxOpenFor (25s)", b.NextProbeAt.Sub(third))
	}
	// Retry-After longer than the open time wins; a later one while open pushes the probe.
	b = b.Failed(third.Add(time.Second), domain.BrokerFailure{Settings: f.Settings, RetryAfter: time.Minute, Error: "x"})
	if !b.NextProbeAt.Equal(third.Add(61*time.Second)) || b.LastError != "x" {
		t.Fatalf("Retry-After 1m while open: %+v", b)
	}
	// A probe whose agent went is taken over once its hold ends; its success closes.
	b, _ = b.Probe(b.NextProbeAt, "c", time.Second)
	if _, ok := b.Probe(b.ProbeUntil, "d", time.Second); !ok {
		t.Fatal("the probe was not taken over once its hold ended")
	}
	b = b.Succeeded()
	if b.State != domain.BreakerClosed || b.Failures != 0 || b.OpenCount != 0 || !b.NextProbeAt.IsZero() || b.ProbeHolder != "" {
		t.Fatalf("the probe succeeded: %+v; want closed and reset", b)
	}
}

func TestCheckBrokerFailureNamesTheField(t *testing.T) {
	ok := domain.BrokerFailure{Settings: domain.DefaultBreakerSettings()}
	if err := domain.CheckBrokerFailure(ok); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for field, change := range map[string]func(*domain.BreakerSettings){
		"breaker.failures":     func(s *domain.BreakerSettings) { s.Failures = 0 },
		"breaker.window":       func(s *domain.BreakerSettings) { s.Window = 0 },
		"breaker.open_for":     func(s *domain.BreakerSettings) { s.OpenFor = -time.Second },
		"breaker.max_open_for": func(s *domain.BreakerSettings) { s.MaxOpenFor = time.Second },
	} {
		bad := ok
		change(&bad.Settings)
		fe, isField := domain.CheckBrokerFailure(bad).(*domain.FieldError)
		if !isField || fe.Field != field {
			t.Errorf("%s: %v", field, domain.CheckBrokerFailure(bad))
		}
	}
}
