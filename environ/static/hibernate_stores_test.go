package static_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// TestHibernateAndWakeOnRealStores: on each real store, hibernating a runtime releases its
// slots (Capacity counts none for it, Check finds nothing amiss, a check reserves nothing)
// and keeps its host in its state; waking it puts it back on that host, where a new runtime
// would not go, or, when the host has filled up meanwhile, on another with a notice saying
// why. Deprovisioning a hibernated
// runtime is a success, and a hibernate under a fenced lease releases nothing.
func TestHibernateAndWakeOnRealStores(t *testing.T) {
	withLookup := func(st domain.State) environ.Deps { return environ.Deps{Slots: st, Resources: st} }
	const spec = `{"runtimes": [{"host": "http://a:9091", "slots": 4}, {"host": "http://b:9091", "slots": 4}]}`
	onRealStores(t, spec, withLookup, func(t *testing.T, ctx context.Context, st domain.State, env environ.Environ) {
		const a, b = "http://a:9091", "http://b:9091"
		hibernator := env.(environ.Hibernator)
		create := func(name, owner string) (domain.Resource, domain.Lease) {
			t.Helper()
			r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: owner, Args: map[string]any{"slots": 1}})
			if err != nil {
				t.Fatal(err)
			}
			c, err := st.ClaimResource(ctx, r.ID, "agent", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return r, c.Lease
		}
		opts := func(owner string) *environ.ResourceOptions {
			slots := 1
			if owner == "alice" {
				slots = 2
			}
			return &environ.ResourceOptions{Owner: owner, Args: map[string]any{"slots": slots}}
		}
		used := func() map[string]int64 {
			t.Helper()
			c, err := env.(environ.CapacityReporter).Capacity(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]int64{}
			for _, h := range c.Hosts {
				out[h.Host] = h.Used
			}
			return out
		}

		x, xLease := create("x", "alice")
		placed, err := env.Reconcile(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, Lease: &xLease}, opts("alice"))
		if err != nil || placed.State["host"] != a {
			t.Fatalf("place x: %+v, %v; want it on a, listed first", placed, err)
		}

		// A hibernate under a fenced lease releases nothing.
		if _, err := st.ClaimResource(ctx, x.ID, "agent", time.Minute); err != nil {
			t.Fatal(err)
		}
		_, err = hibernator.Hibernate(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, State: placed.State, Config: placed.Config, Lease: &xLease}, opts("alice"))
		if !errors.As(err, new(*domain.LeaseHeldError)) {
			t.Fatalf("hibernate under a fenced lease = %v, want the lease reported lost", err)
		}
		if got := used(); got[a] != 2 {
			t.Fatalf("after a fenced hibernate a holds %d slots, want x's 2 kept", got[a])
		}
		c, err := st.ClaimResource(ctx, x.ID, "agent", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		xLease = c.Lease

		hibernated, err := hibernator.Hibernate(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, State: placed.State, Config: placed.Config, Lease: &xLease}, opts("alice"))
		if err != nil {
			t.Fatalf("Hibernate: %v", err)
		}
		if want := map[string]any{"hibernated": true, "host": a, "slots": 2}; !sameJSON(hibernated.State, want) {
			t.Errorf("hibernated state %v, want %v", hibernated.State, want)
		}
		if _, err := st.GetReservation(ctx, "pool", x.ID); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("x's reservation after hibernating: %v; want it released", err)
		}
		if got := used(); got[a] != 0 || got[b] != 0 {
			t.Errorf("capacity used while x is hibernated: %v, want none", got)
		}
		if err := env.Check(ctx); err != nil {
			t.Errorf("Check while x is hibernated: %v", err)
		}
		checked, err := env.CheckResource(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, State: hibernated.State, Config: placed.Config}, opts("alice"))
		if err != nil || len(checked.Repairs) > 0 || !sameJSON(checked.State, hibernated.State) {
			t.Errorf("check of hibernated x: %+v, %v; want it left as it is", checked, err)
		}
		if _, err := st.GetReservation(ctx, "pool", x.ID); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("x's reservation after a check: %v; want none made", err)
		}
		// Hibernating again holds nothing more to release.
		if _, err := hibernator.Hibernate(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, State: hibernated.State, Config: placed.Config, Lease: &xLease}, opts("alice")); err != nil {
			t.Errorf("hibernate again: %v", err)
		}

		// A new runtime goes to a (a tie, a is listed first): b has more room left then.
		w, wLease := create("w", "dave")
		if res, err := env.Reconcile(ctx, &environ.Resource{ID: w.ID, Type: domain.ResourceTypeRuntime, Lease: &wLease}, opts("dave")); err != nil || res.State["host"] != a {
			t.Fatalf("place w: %+v, %v; want it on a", res, err)
		}
		// Woken while a has room: back on a, where a new runtime would not go.
		woken, err := env.Reconcile(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, State: hibernated.State, Config: placed.Config, Lease: &xLease}, opts("alice"))
		if err != nil || woken.State["host"] != a || woken.Notice != "" {
			t.Fatalf("wake x: %+v, %v; want it on a again", woken, err)
		}

		// Hibernated again, then y takes a's last slots: waking x places it on b and says
		// why.
		hibernated, err = hibernator.Hibernate(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, State: woken.State, Config: woken.Config, Lease: &xLease}, opts("alice"))
		if err != nil {
			t.Fatal(err)
		}
		y, yLease := create("y", "bob")
		onA := func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) { return a, nil }
		if _, err := st.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: y.ID, Owner: "bob", Slots: 3, Lease: &yLease, HostSlots: func(string) int { return math.MaxInt32 }}, onA); err != nil {
			t.Fatalf("fill a with y: %v", err)
		}
		woken, err = env.Reconcile(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, State: hibernated.State, Config: woken.Config, Lease: &xLease}, opts("alice"))
		if err != nil || woken.State["host"] != b {
			t.Fatalf("wake x with a full: %+v, %v; want it on b", woken, err)
		}
		if want := "woken on " + b + ": " + a + ", its host before hibernating, had no room"; woken.Notice != want {
			t.Errorf("notice %q, want %q", woken.Notice, want)
		}

		// Deprovisioning a hibernated runtime is a success.
		hibernated, err = hibernator.Hibernate(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, State: woken.State, Config: woken.Config, Lease: &xLease}, opts("alice"))
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Deprovision(ctx, &environ.Resource{ID: x.ID, Type: domain.ResourceTypeRuntime, State: hibernated.State, Lease: &xLease}); err != nil {
			t.Errorf("deprovision hibernated x: %v", err)
		}
		if got := used(); got[a] != 4 || got[b] != 0 {
			t.Errorf("capacity used at the end: %v, want w's and y's 4 slots on a alone", got)
		}
	})
}

// sameJSON reports whether a and b encode to the same JSON.
func sameJSON(a, b map[string]any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
