package static_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
)

// TestFencedLeaseMovesNoSlotsOnRealStore: once another claim fenced the lease a Reconcile or
// Deprovision acts under, the pool's slot writes are refused and the reservation stays as
// the current holder left it; a repair without a lease is refused while the lease is live.
func TestFencedLeaseMovesNoSlotsOnRealStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := openPostgres(t, ctx)
	env, err := static.NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(poolOfThree), environ.Deps{Slots: st, Resources: st})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "alice", Args: map[string]any{"slots": 1}})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(holder string) domain.Lease {
		t.Helper()
		c, err := st.ClaimResource(ctx, r.ID, holder, time.Minute)
		if err != nil {
			t.Fatalf("claim by %s: %v", holder, err)
		}
		return c.Lease
	}
	reconcile := func(lease *domain.Lease, slots int) error {
		_, err := env.Reconcile(ctx, &environ.Resource{ID: r.ID, Type: domain.ResourceTypeRuntime, Lease: lease},
			&environ.ResourceOptions{Owner: "alice", Args: map[string]any{"slots": slots}})
		return err
	}
	reservation := func() domain.Reservation {
		t.Helper()
		res, err := st.GetReservation(ctx, "pool", r.ID)
		if err != nil {
			t.Fatalf("reservation: %v", err)
		}
		return res
	}
	refusedFor := func(what string, err error, holder string) {
		t.Helper()
		var held *domain.LeaseHeldError
		if !errors.As(err, &held) || held.Holder != holder {
			t.Fatalf("%s: err = %v; want the lease reported held by %s", what, err, holder)
		}
	}

	a := claim("agent-a")
	if err := reconcile(&a, 1); err != nil {
		t.Fatalf("reconcile under a's lease: %v", err)
	}
	placed := reservation()
	if err := st.ReleaseResource(ctx, r.ID, a); err != nil {
		t.Fatal(err)
	}
	b := claim("agent-b")

	refusedFor("resize under a's fenced lease", reconcile(&a, 2), "agent-b")
	refusedFor("deprovision under a's fenced lease", env.Deprovision(ctx, &environ.Resource{ID: r.ID, Type: domain.ResourceTypeRuntime, Lease: &a}), "agent-b")
	refusedFor("repair without a lease while b holds one", reconcile(nil, 2), "agent-b")
	if got := reservation(); got != placed {
		t.Fatalf("refused writes left %+v; want %+v untouched", got, placed)
	}

	// A renewal by the same holder fences its earlier claim too.
	b2 := claim("agent-b")
	refusedFor("deprovision under b's earlier claim", env.Deprovision(ctx, &environ.Resource{ID: r.ID, Type: domain.ResourceTypeRuntime, Lease: &b}), "agent-b")
	if err := reconcile(&b2, 2); err != nil {
		t.Fatalf("resize under b's current lease: %v", err)
	}
	if got := reservation(); got.Slots != 2 {
		t.Fatalf("after the resize under the current lease: %+v; want 2 slots", got)
	}
	if err := env.Deprovision(ctx, &environ.Resource{ID: r.ID, Type: domain.ResourceTypeRuntime, Lease: &b2}); err != nil {
		t.Fatalf("deprovision under b's current lease: %v", err)
	}
	if _, err := st.GetReservation(ctx, "pool", r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after deprovision: err = %v; want the reservation gone", err)
	}
}
