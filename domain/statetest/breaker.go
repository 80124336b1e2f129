package statetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// breakerFailure is a failure counted with settings that open the breaker at the third
// failure in a minute, for openFor.
func breakerFailure(openFor time.Duration, retryAfter time.Duration) domain.BrokerFailure {
	return domain.BrokerFailure{
		Settings:   domain.BreakerSettings{Failures: 3, Window: time.Minute, OpenFor: openFor, MaxOpenFor: 4 * openFor},
		RetryAfter: retryAfter,
		Error:      "503 Service Unavailable from the API server",
	}
}

func mustFail(t *testing.T, st domain.BreakerStore, provisioner string, f domain.BrokerFailure) domain.Breaker {
	t.Helper()
	b, err := st.RecordBrokerFailure(testContext(t), provisioner, f)
	if err != nil {
		t.Fatalf("record a failure of %s: %v", provisioner, err)
	}
	return b
}

// onlyBreaker lists the breakers of st and returns provisioner's.
func onlyBreaker(t *testing.T, st domain.BreakerStore, provisioner string) domain.Breaker {
	t.Helper()
	list, err := st.ListBreakers(testContext(t))
	if err != nil {
		t.Fatalf("list breakers: %v", err)
	}
	for _, b := range list {
		if b.Provisioner == provisioner {
			return b
		}
	}
	t.Fatalf("no breaker of %s in %+v", provisioner, list)
	return domain.Breaker{}
}

// waitPast sleeps until the database clock, as b last read it, has passed at.
func waitPast(b domain.Breaker, at time.Time) {
	time.Sleep(at.Sub(b.Now) + 5*time.Millisecond)
}

func testBreakerOpensForEveryAgent(t *testing.T, b *Backend) {
	other := b.Reopen(t)
	if list, err := b.ListBreakers(testContext(t)); err != nil || len(list) != 0 {
		t.Fatalf("breakers of a new store: %v, %v; want none", list, err)
	}
	f := breakerFailure(time.Hour, 0)
	if got := mustFail(t, b, "kube", f); got.State != domain.BreakerClosed || got.Failures != 1 || got.WindowStartedAt.IsZero() {
		t.Fatalf("after one failure: %+v; want closed with one failure", got)
	}
	mustFail(t, other, "kube", f)
	opened := mustFail(t, b, "kube", f)
	if opened.State != domain.BreakerOpen || opened.Failures != 3 || opened.OpenCount != 1 || opened.LastError != f.Error {
		t.Fatalf("after three failures from two agents: %+v; want open", opened)
	}
	if d := opened.NextProbeAt.Sub(opened.OpenedAt); d != time.Hour {
		t.Errorf("next probe %s after it opened, want openFor (1h)", d)
	}
	seen := onlyBreaker(t, other, "kube")
	if seen.State != domain.BreakerOpen || !seen.NextProbeAt.Equal(opened.NextProbeAt) || seen.Now.IsZero() {
		t.Errorf("the other agent reads %+v; want it open until %s", seen, opened.NextProbeAt)
	}
	if _, ok, err := other.TakeBrokerProbe(testContext(t), "kube", "agent-b", time.Minute); err != nil || ok {
		t.Errorf("probe before next_probe_at: %v, %v; want none", ok, err)
	}
	// A broker that asks for a longer wait (Retry-After) gets it.
	longer := mustFail(t, other, "kube", breakerFailure(time.Hour, 2*time.Hour))
	if longer.State != domain.BreakerOpen || longer.Failures != 4 || longer.NextProbeAt.Sub(longer.Now) < 2*time.Hour-time.Second {
		t.Errorf("after a failure asking for 2h: %+v", longer)
	}
}

func testBreakerGivesOneProbeAtATime(t *testing.T, b *Backend) {
	stores := []domain.BreakerStore{b, b.Reopen(t), b.Reopen(t)}
	f := breakerFailure(20*time.Millisecond, 0)
	var opened domain.Breaker
	for range 3 {
		opened = mustFail(t, b, "kube", f)
	}
	waitPast(opened, opened.NextProbeAt)

	var mu sync.Mutex
	var holders []string
	var wg sync.WaitGroup
	for i, st := range stores {
		for j := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				holder := []string{"agent-a", "agent-b", "agent-c"}[i]
				_, ok, err := st.TakeBrokerProbe(testContext(t), "kube", holder, time.Hour)
				if err != nil {
					t.Errorf("take probe %d of %s: %v", j, holder, err)
				}
				if ok {
					mu.Lock()
					holders = append(holders, holder)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(holders) == 0 {
		t.Fatal("nobody got the probe")
	}
	for _, h := range holders[1:] {
		if h != holders[0] {
			t.Fatalf("probes went to %v; want one agent", holders)
		}
	}
	half := onlyBreaker(t, b, "kube")
	if half.State != domain.BreakerHalfOpen || half.ProbeHolder != holders[0] || !half.ProbeUntil.After(half.Now) {
		t.Fatalf("after the probe: %+v; want half-open, held by %s", half, holders[0])
	}

	// The probe fails: open again, for twice as long.
	reopened := mustFail(t, stores[1], "kube", f)
	if reopened.State != domain.BreakerOpen || reopened.OpenCount != 2 || reopened.ProbeHolder != "" ||
		reopened.NextProbeAt.Sub(reopened.OpenedAt) != 40*time.Millisecond {
		t.Fatalf("after the probe failed: %+v; want open a second time, for 40ms", reopened)
	}
	// A success while open closes nothing.
	if still, err := stores[2].RecordBrokerSuccess(testContext(t), "kube"); err != nil || still.State != domain.BreakerOpen {
		t.Fatalf("success while open: %+v, %v; want it still open", still, err)
	}
	waitPast(reopened, reopened.NextProbeAt)
	// A probe whose agent went (its hold ends) is taken by another.
	if _, ok, err := stores[2].TakeBrokerProbe(testContext(t), "kube", "agent-c", 10*time.Millisecond); err != nil || !ok {
		t.Fatalf("probe by agent-c: %v, %v", ok, err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, ok, err := stores[0].TakeBrokerProbe(testContext(t), "kube", "agent-a", time.Hour); err != nil || !ok {
		t.Fatalf("probe by agent-a after agent-c's hold ended: %v, %v", ok, err)
	}
	closed, err := stores[0].RecordBrokerSuccess(testContext(t), "kube")
	if err != nil {
		t.Fatal(err)
	}
	if closed.State != domain.BreakerClosed || closed.Failures != 0 || closed.OpenCount != 0 || closed.ProbeHolder != "" {
		t.Fatalf("after the probe succeeded: %+v; want closed and reset", closed)
	}
	if seen := onlyBreaker(t, stores[1], "kube"); seen.State != domain.BreakerClosed {
		t.Errorf("the other agent reads %+v; want closed", seen)
	}
}

func testBreakerInputsAreChecked(t *testing.T, b *Backend) {
	bad := breakerFailure(time.Second, 0)
	bad.Settings.Failures = 0
	var fe *domain.FieldError
	if _, err := b.RecordBrokerFailure(testContext(t), "kube", bad); !errors.As(err, &fe) || fe.Field != "breaker.failures" {
		t.Errorf("failures 0: %v; want a FieldError on breaker.failures", err)
	}
	if _, err := b.RecordBrokerFailure(testContext(t), "", breakerFailure(time.Second, 0)); !errors.As(err, &fe) {
		t.Errorf("no provisioner: %v; want a FieldError", err)
	}
	if _, _, err := b.TakeBrokerProbe(testContext(t), "kube", "", time.Second); err == nil {
		t.Error("a probe without a holder was taken")
	}
	if got, err := b.RecordBrokerSuccess(testContext(t), "fresh"); err != nil || got.State != domain.BreakerClosed {
		t.Errorf("success of a provisioner without a breaker: %+v, %v; want closed", got, err)
	}
}
