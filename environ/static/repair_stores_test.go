package static_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// TestRepairsCarryTheCheckToTheStore: on each real store, a check's repair of a missing
// reservation hands the store the row as the check read it, and the store refuses it once
// the runtime moved on (here: hibernated by another agent after the check read it) or its
// row is gone, reserving nothing. The environ is given no resource lookup, so the store's
// fence alone decides.
func TestRepairsCarryTheCheckToTheStore(t *testing.T) {
	slotsOnly := func(st domain.State) environ.Deps { return environ.Deps{Slots: st} }
	onRealStores(t, `{"runtimes": [{"host": "http://a:9091", "slots": 4}]}`, slotsOnly, func(t *testing.T, ctx context.Context, st domain.State, env environ.Environ) {
		opts := &environ.ResourceOptions{Owner: "alice", Args: map[string]any{"slots": 1}, Generation: 1}
		// ready creates a runtime, places it and records it ready under a lease, as the
		// provisioner does, and returns the row as a check then reads it.
		ready := func(name string) domain.Resource {
			t.Helper()
			r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "alice", Args: map[string]any{"slots": 1}})
			if err != nil {
				t.Fatal(err)
			}
			c, err := st.ClaimResource(ctx, r.ID, "agent-a", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			placed, err := env.Reconcile(ctx, &environ.Resource{ID: r.ID, Type: r.Type, Lease: &c.Lease}, opts)
			if err != nil {
				t.Fatal(err)
			}
			observed := int64(1)
			r, err = st.RecordProgress(ctx, r.ID, c.Lease, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable,
				StatusMessage: "ready", Provisioner: "pool", State: placed.State, ObservedGeneration: &observed, ReleaseLease: true})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		check := func(r domain.Resource, checked domain.Checked) error {
			t.Helper()
			_, err := env.CheckResource(ctx, &environ.Resource{ID: r.ID, Type: r.Type, State: r.State, Checked: &checked}, opts)
			return err
		}
		unreserved := func(what, id string) {
			t.Helper()
			if res, err := st.GetReservation(ctx, "pool", id); !errors.Is(err, domain.ErrNotFound) {
				t.Errorf("%s: reservation %+v, %v; want none", what, res, err)
			}
		}

		intact := ready("intact")
		if err := st.ReleaseSlots(ctx, "pool", intact.ID, nil); err != nil {
			t.Fatal(err)
		}
		if err := check(intact, intact.CheckedBy("agent-b")); err != nil {
			t.Fatalf("repair of a runtime as it was checked: %v", err)
		}
		if _, err := st.GetReservation(ctx, "pool", intact.ID); err != nil {
			t.Errorf("the repair reserved nothing: %v", err)
		}

		// Read by agent-b's check; then agent-a hibernates it, releasing its slots.
		hibernated := ready("hibernated")
		checked := hibernated.CheckedBy("agent-b")
		if _, err := st.SetHibernate(ctx, hibernated.ID, true); err != nil {
			t.Fatal(err)
		}
		c, err := st.ClaimResource(ctx, hibernated.ID, "agent-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.(environ.Hibernator).Hibernate(ctx, &environ.Resource{ID: hibernated.ID, Type: hibernated.Type, State: hibernated.State, Lease: &c.Lease}, opts); err != nil {
			t.Fatal(err)
		}
		if err := check(hibernated, checked); !errors.Is(err, domain.ErrStale) {
			t.Errorf("repair of a runtime hibernated since its check: %v; want ErrStale", err)
		}
		unreserved("after the refused repair of a hibernated runtime", hibernated.ID)

		gone := ready("gone")
		checked = gone.CheckedBy("agent-b")
		if _, err := st.RequestDelete(ctx, gone.ID); err != nil {
			t.Fatal(err)
		}
		c, err = st.ClaimResource(ctx, gone.ID, "agent-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Deprovision(ctx, &environ.Resource{ID: gone.ID, Type: gone.Type, Lease: &c.Lease}); err != nil {
			t.Fatal(err)
		}
		if err := st.FinalizeDelete(ctx, gone.ID, c.Lease); err != nil {
			t.Fatal(err)
		}
		if err := check(gone, checked); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("repair of a runtime deleted since its check: %v; want ErrNotFound", err)
		}
		unreserved("after the refused repair of a deleted runtime", gone.ID)
	})
}
