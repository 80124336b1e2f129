package static_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
)

// TestCheckSweepsOrphansOnRealStore: the pool's Check releases the reservations of resources
// whose rows are gone, and keeps those of live resources and of resources being deleted
// (their deprovision releases them).
func TestCheckSweepsOrphansOnRealStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := openPostgres(t, ctx)
	env, err := static.NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(poolOfThree), environ.Deps{Slots: st, Resources: st})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	create := func(name string) string {
		r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "alice", Args: map[string]any{"slots": 1}})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return r.ID
	}
	live, deleting, gone := create("live"), create("deleting"), create("gone")
	const never = "00000000-0000-4000-8000-000000000001"
	for _, id := range []string{live, deleting, gone, never} {
		if _, err := env.Reconcile(ctx, &environ.Resource{ID: id, Type: domain.ResourceTypeRuntime},
			&environ.ResourceOptions{Owner: "alice", Args: map[string]any{"slots": 1}}); err != nil {
			t.Fatalf("reserve for %s: %v", id, err)
		}
	}
	for _, id := range []string{deleting, gone} {
		if _, err := st.RequestDelete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	claim, err := st.ClaimResource(ctx, gone, "agent", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.FinalizeDelete(ctx, gone, claim.Lease); err != nil {
		t.Fatal(err)
	}

	if err := env.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	left, err := st.ListReservations(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, res := range left {
		got = append(got, res.ResourceID)
	}
	want := []string{live, deleting}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("reservations after Check are those of %v, want those of the live and the deleting resource %v", got, want)
	}
}
