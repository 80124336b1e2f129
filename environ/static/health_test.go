package static

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/testkit"
)

// runtimeHost is a real HTTP server standing in for a runtime host: its ping endpoint answers
// with status, and it counts the probes.
type runtimeHost struct {
	*httptest.Server
	status atomic.Int32
	probes atomic.Int32
}

func newRuntimeHost(t *testing.T, status int) *runtimeHost {
	t.Helper()
	h := &runtimeHost{}
	h.status.Store(int32(status))
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/ping" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		h.probes.Add(1)
		w.WriteHeader(int(h.status.Load()))
	}))
	t.Cleanup(h.Close)
	return h
}

// probedPool is an environ over real hosts a (2 slots) and b (4 slots) on a test clock.
type probedPool struct {
	env   environ.Environ
	a, b  *runtimeHost
	clock *testclock.Clock
	slots *fakeSlots
}

func newProbedPool(t *testing.T, bStatus int) *probedPool {
	t.Helper()
	p := &probedPool{
		a:     newRuntimeHost(t, http.StatusOK),
		b:     newRuntimeHost(t, bStatus),
		clock: testclock.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		slots: newFakeSlots(),
	}
	spec := fmt.Sprintf(`{"runtimes": [{"host": %q, "slots": 2}, {"host": %q, "slots": 4}]}`, p.a.URL, p.b.URL)
	env, err := New("pool", json.RawMessage(spec), environ.Deps{Slots: p.slots, Clock: p.clock})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	p.env = env
	return p
}

func TestHostDownIsUnhealthyAndAvoidedUntilItAnswers(t *testing.T) {
	ctx := context.Background()
	p := newProbedPool(t, http.StatusOK)
	onB, err := p.env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 1))
	if err != nil || onB.State["host"] != p.b.URL {
		t.Fatalf("first runtime = %v, %v; want it on b, the freest host", onB, err)
	}

	p.b.status.Store(http.StatusServiceUnavailable)
	p.clock.Advance(probeCacheTTL)
	got, err := p.env.CheckResource(ctx, runtimeRes("r1"), withSlots("alice", 1))
	if err == nil || !strings.Contains(err.Error(), "runtime host "+p.b.URL+" is down") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("CheckResource on a failing host: %v, want it down with the answer", err)
	}
	if got == nil || got.State["host"] != p.b.URL {
		t.Errorf("CheckResource on a failing host returned %v, want the resource to save", got)
	}
	err = p.env.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "host "+p.b.URL+" is down") || strings.Contains(err.Error(), p.a.URL+" is down") {
		t.Errorf("Check = %v, want b down and a not", err)
	}

	// b has more room but is down: new runtimes go to a, and none at all once a is full.
	for _, id := range []string{"r2", "r3"} {
		res, err := p.env.Reconcile(ctx, runtimeRes(id), withSlots("bob", 1))
		if err != nil || res.State["host"] != p.a.URL {
			t.Fatalf("Reconcile %s with b down = %v, %v; want it on a", id, res, err)
		}
	}
	_, err = p.env.Reconcile(ctx, runtimeRes("r4"), withSlots("bob", 1))
	if !errors.Is(err, domain.ErrNoCapacity) || !strings.Contains(err.Error(), "down: "+p.b.URL) {
		t.Errorf("Reconcile with a full and b down = %v, want ErrNoCapacity naming b as down", err)
	}
	c, err := p.env.(environ.CapacityReporter).Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := environ.Capacity{Unit: "slots", Total: 6, Used: 3, Hosts: []environ.HostCapacity{
		{Host: p.a.URL, Total: 2, Used: 2},
		{Host: p.b.URL, Total: 4, Used: 1, Down: true},
	}}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Errorf("Capacity = %+v, want %+v", c, want)
	}

	// b answers again; Check probes it once its last result is older than the cache.
	p.b.status.Store(http.StatusOK)
	if err := p.env.Check(ctx); err == nil {
		t.Error("Check within the cache TTL of b's failure: nil, want b still down")
	}
	p.clock.Advance(probeCacheTTL)
	if err := p.env.Check(ctx); err != nil {
		t.Errorf("Check after b answers: %v", err)
	}
	if res, err := p.env.Reconcile(ctx, runtimeRes("r4"), withSlots("bob", 1)); err != nil || res.State["host"] != p.b.URL {
		t.Errorf("Reconcile after b is back = %v, %v; want it on b", res, err)
	}
	if _, err := p.env.CheckResource(ctx, runtimeRes("r1"), withSlots("alice", 1)); err != nil {
		t.Errorf("CheckResource after b is back: %v", err)
	}
}

func TestProbesAreCachedPerHost(t *testing.T) {
	ctx := context.Background()
	p := newProbedPool(t, http.StatusOK)
	for i := range 4 {
		if _, err := p.env.Reconcile(ctx, runtimeRes(fmt.Sprint("r", i)), withSlots(fmt.Sprint("owner", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 5 {
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.env.CheckResource(ctx, runtimeRes(fmt.Sprint("r", i)), withSlots(fmt.Sprint("owner", i), 1)); err != nil {
					t.Errorf("CheckResource: %v", err)
				}
			}()
		}
	}
	wg.Wait()
	if a, b := p.a.probes.Load(), p.b.probes.Load(); a != 1 || b != 1 {
		t.Errorf("20 checks of runtimes on two hosts probed a %d and b %d times, want once each", a, b)
	}
	p.clock.Advance(probeCacheTTL - time.Second)
	if _, err := p.env.CheckResource(ctx, runtimeRes("r0"), withSlots("owner0", 1)); err != nil {
		t.Fatal(err)
	}
	p.clock.Advance(time.Second)
	if err := p.env.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := p.a.probes.Load(), p.b.probes.Load(); a != 2 || b != 2 {
		t.Errorf("after the cache expired, probes of a %d and b %d, want 2 each", a, b)
	}
}

func TestHostsWithoutRuntimesRecoverThroughCheck(t *testing.T) {
	ctx := context.Background()
	p := newProbedPool(t, http.StatusInternalServerError)
	if err := p.env.Check(ctx); err == nil || !strings.Contains(err.Error(), p.b.URL+" is down") {
		t.Fatalf("Check with b failing: %v", err)
	}
	if res, err := p.env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 1)); err != nil || res.State["host"] != p.a.URL {
		t.Fatalf("Reconcile with b down = %v, %v; want a", res, err)
	}
	p.b.status.Store(http.StatusNoContent)
	p.clock.Advance(probeCacheTTL)
	if err := p.env.Check(ctx); err != nil {
		t.Fatalf("Check after b answers 204: %v", err)
	}
	if res, err := p.env.Reconcile(ctx, runtimeRes("r2"), withSlots("alice", 1)); err != nil || res.State["host"] != p.b.URL {
		t.Errorf("Reconcile after b recovered = %v, %v; want b", res, err)
	}
}

func TestProbeTimesOutOnTheClock(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer hung.Close()
	clk := testclock.NewClock(time.Now())
	spec := fmt.Sprintf(`{"runtimes": [{"host": %q, "slots": 1}], "health_timeout_seconds": 3}`, hung.URL)
	env, err := New("pool", json.RawMessage(spec), environ.Deps{Slots: newFakeSlots(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- env.Check(context.Background()) }()
	if err := clk.WaitAdvance(3*time.Second, 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no answer within 3s") {
			t.Errorf("Check of a host that never answers: %v, want a timeout", err)
		}
	case <-time.After(testkit.LongWait):
		t.Fatal("Check did not return after the probe timeout")
	}
}

func TestProbesOff(t *testing.T) {
	down := newRuntimeHost(t, http.StatusServiceUnavailable)
	spec := fmt.Sprintf(`{"runtimes": [{"host": %q, "slots": 1}], "health_path": ""}`, down.URL)
	env, err := New("pool", json.RawMessage(spec), environ.Deps{Slots: newFakeSlots()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := env.Check(ctx); err != nil {
		t.Errorf("Check with probes off: %v", err)
	}
	if _, err := env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CheckResource(ctx, runtimeRes("r1"), withSlots("alice", 1)); err != nil {
		t.Errorf("CheckResource with probes off: %v", err)
	}
	if n := down.probes.Load(); n != 0 {
		t.Errorf("probes off, yet the host was probed %d times", n)
	}
}

func TestCheckResourceReportsRepairs(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	env := newTestEnviron(t, "pool", twoHosts, store)
	if _, err := env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 2)); err != nil {
		t.Fatal(err)
	}
	got, err := env.CheckResource(ctx, &environ.Resource{ID: "r1", Type: domain.ResourceTypeRuntime, State: map[string]any{"host": hostA, "slots": 2}}, withSlots("alice", 2))
	if err != nil || len(got.Repairs) != 0 {
		t.Fatalf("CheckResource of an intact runtime = %+v, %v; want no repairs", got, err)
	}
	if err := store.ReleaseSlots(ctx, "pool", "r1", nil); err != nil {
		t.Fatal(err)
	}
	got, err = env.CheckResource(ctx, &environ.Resource{ID: "r1", Type: domain.ResourceTypeRuntime, State: map[string]any{"host": hostA, "slots": 2}}, withSlots("alice", 2))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"slot reservation was missing; reserved 2 slots on " + hostA + " again"}; fmt.Sprint(got.Repairs) != fmt.Sprint(want) {
		t.Errorf("repairs = %q, want %q", got.Repairs, want)
	}
}

func TestCapacityCountsUnconfiguredHosts(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	store.put(domain.Reservation{Provisioner: "pool", ResourceID: "old1", Host: "http://old:9091", Slots: 2})
	store.put(domain.Reservation{Provisioner: "pool", ResourceID: "old2", Host: "http://old:9091", Slots: 1})
	store.put(domain.Reservation{Provisioner: "pool", ResourceID: "r1", Host: hostB, Slots: 1})
	env := newTestEnviron(t, "pool", twoHosts, store)
	c, err := env.(environ.CapacityReporter).Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := environ.Capacity{Unit: "slots", Total: 5, Used: 4, Hosts: []environ.HostCapacity{
		{Host: hostA, Total: 3}, {Host: hostB, Total: 2, Used: 1}, {Host: "http://old:9091", Used: 3},
	}}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Errorf("Capacity = %+v, want %+v", c, want)
	}
}

// TestNeverProbedHostIsProbedBeforeItsFirstRuntime: right after start no host has been
// probed; the first placement probes both, and b, freest but failing, gets nothing.
func TestNeverProbedHostIsProbedBeforeItsFirstRuntime(t *testing.T) {
	ctx := context.Background()
	p := newProbedPool(t, http.StatusServiceUnavailable)
	res, err := p.env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 1))
	if err != nil || res.State["host"] != p.a.URL {
		t.Fatalf("first Reconcile = %v, %v; want it on a, b never having answered", res, err)
	}
	if err := p.env.AwaitReady(ctx, res); err != nil {
		t.Errorf("AwaitReady on a: %v", err)
	}
	// Known hosts are not probed again by placement; Check refreshes them.
	p.clock.Advance(probeCacheTTL)
	if _, err := p.env.Reconcile(ctx, runtimeRes("r2"), withSlots("bob", 1)); err != nil {
		t.Fatal(err)
	}
	if a, b := p.a.probes.Load(), p.b.probes.Load(); a != 1 || b != 1 {
		t.Errorf("probes of a %d and b %d, want one each: placement probes only hosts it has never heard from", a, b)
	}
}

// hungHost is a runtime host that never answers its ping; each probe is announced on
// arrived before the handler waits for the probe's end.
func hungHost(t *testing.T) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	arrived := make(chan struct{}, 8)
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(h.Close)
	return h, arrived
}

// awaitProbe waits for a probe to reach a hungHost; the bound only stops a broken test.
func awaitProbe(t *testing.T, arrived <-chan struct{}) {
	t.Helper()
	select {
	case <-arrived:
	case <-time.After(testkit.LongWait):
		t.Fatal("no health probe reached the host")
	}
}

func TestPlacementProbeIsBoundedByTheTimeoutAndEndsWithTheContext(t *testing.T) {
	hung, arrived := hungHost(t)
	clk := testclock.NewClock(time.Now())
	spec := fmt.Sprintf(`{"runtimes": [{"host": %q, "slots": 1}], "health_timeout_seconds": 3}`, hung.URL)
	env, err := New("pool", json.RawMessage(spec), environ.Deps{Slots: newFakeSlots(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	// Cancelled while the probe waits: Reconcile returns at once and the host stays unprobed.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 1))
		done <- err
	}()
	awaitProbe(t, arrived)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Reconcile cancelled during the probe = %v, want context.Canceled", err)
	}

	// Unprobed still: the next placement probes again, and gives up after the timeout.
	go func() {
		_, err := env.Reconcile(context.Background(), runtimeRes("r1"), withSlots("alice", 1))
		done <- err
	}()
	awaitProbe(t, arrived)
	if err := clk.WaitAdvance(3*time.Second, 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, domain.ErrNoCapacity) || !strings.Contains(err.Error(), "is up (down: "+hung.URL+")") {
		t.Errorf("Reconcile with the only host silent = %v, want ErrNoCapacity naming it down", err)
	}
}

// TestRuntimeOnAHostThatGoesDown pins down who moves: a runtime no client has yet (no
// config) leaves a down host on its next attempt; a served one stays, and is reported.
func TestRuntimeOnAHostThatGoesDown(t *testing.T) {
	ctx := context.Background()
	p := newProbedPool(t, http.StatusOK)
	placed, err := p.env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 1))
	if err != nil || placed.State["host"] != p.b.URL {
		t.Fatalf("Reconcile = %v, %v; want b", placed, err)
	}
	served, err := p.env.Reconcile(ctx, runtimeRes("s1"), withSlots("bob", 1))
	if err != nil || served.State["host"] != p.b.URL {
		t.Fatalf("Reconcile = %v, %v; want b", served, err)
	}

	p.b.status.Store(http.StatusServiceUnavailable)
	p.clock.Advance(probeCacheTTL)
	err = p.env.AwaitReady(ctx, placed)
	if err == nil || !strings.Contains(err.Error(), "runtime host "+p.b.URL+" is down") {
		t.Fatalf("AwaitReady on a host that stopped answering = %v, want it down", err)
	}

	// The next attempt: r1 has no config, so no client has b's URL: it moves to a.
	moved, err := p.env.Reconcile(ctx, &environ.Resource{ID: "r1", Type: domain.ResourceTypeRuntime, State: placed.State}, withSlots("alice", 1))
	if err != nil || moved.State["host"] != p.a.URL {
		t.Fatalf("Reconcile after AwaitReady failed = %v, %v; want it moved to a", moved, err)
	}
	if want := "moved from " + p.b.URL + ", which is down, to " + p.a.URL; moved.Notice != want {
		t.Errorf("notice = %q, want %q", moved.Notice, want)
	}
	if err := p.env.AwaitReady(ctx, moved); err != nil {
		t.Errorf("AwaitReady on a: %v", err)
	}

	// s1 was served (its clients hold b's URL and its data is on b): it stays, reported down.
	s1 := &environ.Resource{ID: "s1", Type: domain.ResourceTypeRuntime, State: served.State, Config: served.Config}
	kept, err := p.env.Reconcile(ctx, s1, withSlots("bob", 1))
	if err != nil || kept.State["host"] != p.b.URL || kept.Notice != "" {
		t.Errorf("Reconcile of a served runtime on a down host = %+v, %v; want it kept on b", kept, err)
	}
	if _, err := p.env.CheckResource(ctx, s1, withSlots("bob", 1)); err == nil || !strings.Contains(err.Error(), p.b.URL+" is down") {
		t.Errorf("CheckResource of the served runtime = %v, want b down", err)
	}

	// An unserved runtime whose resize finds no room on a host that is up keeps its slots.
	big, err := p.env.Reconcile(ctx, runtimeRes("r2"), withSlots("carol", 1))
	if err != nil || big.State["host"] != p.a.URL {
		t.Fatalf("Reconcile r2 = %v, %v; want a, the only host up", big, err)
	}
	p.slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "r3", Owner: "dave", Host: p.b.URL, Slots: 1})
	_, err = p.env.Reconcile(ctx, runtimeRes("r3"), withSlots("dave", 1))
	if !errors.Is(err, domain.ErrNoCapacity) || !strings.Contains(err.Error(), "host "+p.b.URL+" is down and the runtime keeps its slots there") {
		t.Errorf("Reconcile of an unserved runtime on b with a full = %v, want it kept waiting", err)
	}
	if res, found, err := p.env.(*staticEnviron).reservation(ctx, "r3"); err != nil || !found || res.Host != p.b.URL {
		t.Errorf("r3's reservation = %+v, %v, %v; want it still on b", res, found, err)
	}
}
