package statetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// raceRounds is how many times the race tests run a repair against what races it.
const raceRounds = 20

// reconciled creates a runtime and brings it to ready at generation 1 through agent-a's
// lease, as the provisioner does, placing it on host h1; the lease is released.
func reconciled(t *testing.T, b *Backend, name string) domain.Resource {
	t.Helper()
	r := mustCreate(t, b, runtime(name))
	lease := mustClaim(t, b, r.ID, "agent-a")
	if _, err := b.ReserveSlots(testContext(t), poolRequest(r.ID, 1, &lease), (&countingPick{host: "h1"}).pick); err != nil {
		t.Fatalf("reserve for %s: %v", name, err)
	}
	return record(t, b, r.ID, lease, domain.StatusReady, map[string]any{"host": "h1"})
}

// record records status (and state, when not nil) at generation 1 under lease, observing
// the generation when status is ready, and releases the lease.
func record(t *testing.T, b *Backend, id string, lease domain.Lease, status domain.Status, state map[string]any) domain.Resource {
	t.Helper()
	u := domain.ProgressUpdate{Generation: 1, Status: status, Reason: domain.ReasonsByStatus[status][0], StatusMessage: string(status), Provisioner: "pool", State: state, ReleaseLease: true}
	if status == domain.StatusReady {
		observed := int64(1)
		u.ObservedGeneration = &observed
	}
	r, err := b.RecordProgress(testContext(t), id, lease, u)
	if err != nil {
		t.Fatalf("record %s of %s: %v", status, id, err)
	}
	return r
}

// repair is the slot reservation a health check of agent-b makes, under no lease, to put
// back the missing reservation of the resource it read as checked.
func repair(ctx context.Context, st domain.SlotStore, checked domain.Checked, id string) error {
	req := poolRequest(id, 1, nil)
	req.Checked = &checked
	_, err := st.ReserveSlots(ctx, req, (&countingPick{host: "h2"}).pick)
	return err
}

// hibernate does what the provisioner does to hibernate the resource: the client asks,
// the agent claims it, releases its slots and records it hibernated.
func hibernate(ctx context.Context, st domain.State, id string) error {
	if _, err := st.SetHibernate(ctx, id, true); err != nil {
		return err
	}
	lease, err := claimAndFree(ctx, st, id)
	if err != nil {
		return err
	}
	_, err = st.RecordProgress(ctx, id, lease, domain.ProgressUpdate{Generation: 1, Status: domain.StatusHibernated, Reason: domain.ReasonHibernated,
		StatusMessage: "hibernated", Provisioner: "pool", ReleaseLease: true})
	return err
}

// claimAndFree claims the resource for agent-a and releases its slots under the lease, as
// a hibernate or a deprovision starts.
func claimAndFree(ctx context.Context, st domain.State, id string) (domain.Lease, error) {
	c, err := st.ClaimResource(ctx, id, "agent-a", ttl)
	if err != nil {
		return domain.Lease{}, err
	}
	return c.Lease, st.ReleaseSlots(ctx, "pool", id, &c.Lease)
}

// deleteResource does what a delete does: the client asks, the agent claims the resource,
// releases its slots and removes the row.
func deleteResource(ctx context.Context, st domain.State, id string) error {
	if _, err := st.RequestDelete(ctx, id); err != nil {
		return err
	}
	lease, err := claimAndFree(ctx, st, id)
	if err != nil {
		return err
	}
	return st.FinalizeDelete(ctx, id, lease)
}

// expectRefusedRepair checks that a repair was refused as the row having moved on (want
// ErrStale) or gone (want ErrNotFound), and that it reserved nothing.
func expectRefusedRepair(t *testing.T, b *Backend, what, id string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: err = %v; want it refused (%v)", what, err, want)
	}
	if res := reservationOf(t, b, id); res != nil {
		t.Errorf("%s: a refused repair left %+v", what, res)
	}
}

// testRepairsLoseToAHibernate checks a health check's repair (a reservation under no lease,
// decided on the row as the check read it) against a hibernate: one made after the client
// asked, or after the agent claimed or hibernated the resource, is refused, and a repair
// racing a hibernate never leaves a reservation behind.
func testRepairsLoseToAHibernate(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := reconciled(t, b, "asked")
	checked := r.CheckedBy("agent-b")
	if err := b.ReleaseSlots(ctx, "pool", r.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetHibernate(ctx, r.ID, true); err != nil {
		t.Fatal(err)
	}
	expectRefusedRepair(t, b, "repair of a resource asked to hibernate", r.ID, repair(ctx, b, checked, r.ID), domain.ErrStale)
	lease := mustClaim(t, b, r.ID, "agent-a")
	// Asked to wake again before the agent hibernated it: only the claim tells the repair
	// that the row moved on since its check.
	if _, err := b.SetHibernate(ctx, r.ID, false); err != nil {
		t.Fatal(err)
	}
	expectRefusedRepair(t, b, "repair of a resource claimed since its check", r.ID, repair(ctx, b, checked, r.ID), domain.ErrStale)
	record(t, b, r.ID, lease, domain.StatusHibernated, nil)
	expectRefusedRepair(t, b, "repair of a hibernated resource", r.ID, repair(ctx, b, mustGet(t, b, r.ID).CheckedBy("agent-b"), r.ID), domain.ErrStale)

	// The row as it was checked still allows the repair.
	ok := reconciled(t, b, "healthy")
	if err := b.ReleaseSlots(ctx, "pool", ok.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := repair(ctx, b, ok.CheckedBy("agent-b"), ok.ID); err != nil {
		t.Fatalf("repair of a resource as it was checked: %v", err)
	}
	if res := reservationOf(t, b, ok.ID); res == nil || res.Host != "h2" {
		t.Fatalf("repair reserved %+v; want the slots on h2", res)
	}
	if err := repair(ctx, b, domain.Checked{Holder: "agent-b", Generation: 1}, ok.ID); err == nil {
		t.Error("repair under a check of the row before it was claimed: nil error")
	}
	lease = mustClaim(t, b, ok.ID, "agent-a")
	both := poolRequest(ok.ID, 1, &lease)
	both.Checked = &domain.Checked{Holder: "agent-b", Generation: 1, LeaseToken: lease.Token}
	if _, err := b.ReserveSlots(ctx, both, (&countingPick{host: "h2"}).pick); err == nil || !errors.As(err, new(*domain.FieldError)) {
		t.Errorf("a request under a lease and a check: err = %v; want a field error", err)
	}

	raceRepairs(t, b, "hibernate", hibernate)
}

// testRepairsOfAGoneRowReserveNothing checks a repair against a delete: a repair of a row
// that is gone reserves nothing, and one racing the delete leaves no orphan behind.
func testRepairsOfAGoneRowReserveNothing(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := reconciled(t, b, "gone")
	checked := r.CheckedBy("agent-b")
	if err := deleteResource(ctx, b, r.ID); err != nil {
		t.Fatal(err)
	}
	expectRefusedRepair(t, b, "repair of a deleted resource", r.ID, repair(ctx, b, checked, r.ID), domain.ErrNotFound)
	expectRefusedRepair(t, b, "repair of a resource that never was", missingID, repair(ctx, b, domain.Checked{Holder: "agent-b", Generation: 1}, missingID), domain.ErrNotFound)
	deleting := reconciled(t, b, "deleting")
	if err := b.ReleaseSlots(ctx, "pool", deleting.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RequestDelete(ctx, deleting.ID); err != nil {
		t.Fatal(err)
	}
	expectRefusedRepair(t, b, "repair of a resource being deleted", deleting.ID, repair(ctx, b, deleting.CheckedBy("agent-b"), deleting.ID), domain.ErrStale)

	raceRepairs(t, b, "delete", deleteResource)
	if orphans, err := b.OrphanedReservations(ctx, "pool", "", 100); err != nil || len(orphans) != 0 {
		t.Errorf("orphaned reservations = %+v, %v; want none", orphans, err)
	}
}

// raceRepairs runs, raceRounds times, a repair of a freshly reconciled resource at once with
// race (a hibernate or a delete, which releases the resource's slots), each through a store
// of its own: whichever comes first, the resource ends with no reservation, and a repair
// that is refused says the row moved on or is gone.
func raceRepairs(t *testing.T, b *Backend, what string, race func(context.Context, domain.State, string) error) {
	t.Helper()
	ctx := testContext(t)
	other := b.Reopen(t)
	for round := range raceRounds {
		r := reconciled(t, b, what+"-"+string(rune('a'+round)))
		checked := r.CheckedBy("agent-b")
		var wg sync.WaitGroup
		var raceErr, repairErr error
		wg.Add(2)
		go func() { defer wg.Done(); raceErr = race(ctx, b, r.ID) }()
		go func() { defer wg.Done(); repairErr = repair(ctx, other, checked, r.ID) }()
		wg.Wait()
		if raceErr != nil {
			t.Fatalf("round %d: %s: %v", round, what, raceErr)
		}
		if repairErr != nil && !errors.Is(repairErr, domain.ErrStale) && !errors.Is(repairErr, domain.ErrNotFound) {
			t.Fatalf("round %d: repair: %v; want success, ErrStale or ErrNotFound", round, repairErr)
		}
		if res := reservationOf(t, b, r.ID); res != nil {
			t.Fatalf("round %d: after the %s the resource holds %+v (repair: %v)", round, what, res, repairErr)
		}
	}
}

// testStaleHealthRecordsAreRefused checks RecordHealth against what moves a resource on
// without a new generation: a hibernate and wake placing it elsewhere, and another agent's
// live lease. The check's record is refused and the state it would have rewritten stays.
func testStaleHealthRecordsAreRefused(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := reconciled(t, b, "woken")
	checked := r.CheckedBy("agent-b")
	if err := hibernate(ctx, b, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetHibernate(ctx, r.ID, false); err != nil {
		t.Fatal(err)
	}
	lease := mustClaim(t, b, r.ID, "agent-a")
	woken := record(t, b, r.ID, lease, domain.StatusReady, map[string]any{"host": "h3"})
	if woken.Generation != checked.Generation || !woken.UpToDate() {
		t.Fatalf("woken = %+v; want ready at the generation checked", woken)
	}
	stale := domain.HealthUpdate{Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed, StatusMessage: "h1 is down", UnhealthySince: woken.UpdatedAt,
		State: map[string]any{"host": "h1"}, Repairs: []string{"reserved on h1 again"}}
	events := latestEvent(t, b)
	if _, err := b.RecordHealth(ctx, r.ID, checked, stale); !errors.Is(err, domain.ErrStale) || !strings.Contains(err.Error(), "claimed since") {
		t.Errorf("record a check made before a wake: err = %v; want ErrStale saying it was claimed since", err)
	}
	if got := mustGet(t, b, r.ID); got.Status != domain.StatusReady || got.State["host"] != "h3" {
		t.Errorf("after a refused record: %s on %v; want ready on h3", got.Status, got.State["host"])
	}
	if got := eventsSince(t, b, events); len(got) != 0 {
		t.Errorf("a refused record recorded %q", got)
	}

	// Another holder's live lease refuses the record of a check that read the row after the
	// claim; the holder's own check records.
	held := mustClaim(t, b, r.ID, "agent-a")
	now := mustGet(t, b, r.ID)
	_, err := b.RecordHealth(ctx, r.ID, now.CheckedBy("agent-b"), stale)
	if !errors.Is(err, domain.ErrStale) || !errors.Is(err, domain.ErrLeaseHeld) {
		t.Errorf("record under another agent's live lease: err = %v; want ErrStale and ErrLeaseHeld", err)
	}
	if _, err := b.RecordHealth(ctx, r.ID, now.CheckedBy("agent-a"), domain.HealthUpdate{Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "ready"}); err != nil {
		t.Errorf("record by the lease's holder: %v", err)
	}
	if err := b.ReleaseResource(ctx, r.ID, held); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordHealth(ctx, r.ID, mustGet(t, b, r.ID).CheckedBy("agent-b"), domain.HealthUpdate{Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "checked"}); err != nil {
		t.Errorf("record once the lease is released: %v", err)
	}
}

// testRepairsOfARefusedRecordAreKept checks RecordRepairs, which the health checker calls
// when a check's record is refused after its environ repaired something: the repairs are
// recorded in the status the row has now, and nothing else of the refused check is.
func testRepairsOfARefusedRecordAreKept(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := reconciled(t, b, "moved")
	checked := r.CheckedBy("agent-b")
	lease := mustClaim(t, b, r.ID, "agent-a")
	record(t, b, r.ID, lease, domain.StatusReady, map[string]any{"host": "h3"})
	events := latestEvent(t, b)
	stale := domain.HealthUpdate{Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed, StatusMessage: "deployment was missing",
		UnhealthySince: time.Now(), Repairs: []string{"deployment moved re-applied: missing", "service moved re-applied"}}
	if _, err := b.RecordHealth(ctx, r.ID, checked, stale); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("record a check made before a claim: err = %v; want ErrStale", err)
	}
	if err := b.RecordRepairs(ctx, r.ID, stale.Repairs); err != nil {
		t.Fatalf("record the refused check's repairs: %v", err)
	}
	want := []string{"repair ready deployment moved re-applied: missing", "repair ready service moved re-applied"}
	if got := eventsSince(t, b, events); !slices.Equal(got, want) {
		t.Errorf("events after the refused record and its repairs = %q; want %q", got, want)
	}
	if got := mustGet(t, b, r.ID); got.Status != domain.StatusReady || got.State["host"] != "h3" {
		t.Errorf("after the repairs: %s on %v; want ready on h3 as the claim left it", got.Status, got.State["host"])
	}

	for _, bad := range []struct {
		repairs []string
		field   string
	}{{nil, "repairs"}, {[]string{"put right", ""}, "repairs[1]"}} {
		var fe *domain.FieldError
		if err := b.RecordRepairs(ctx, r.ID, bad.repairs); !errors.As(err, &fe) || fe.Field != bad.field {
			t.Errorf("record repairs %q: %v; want a FieldError on %s", bad.repairs, err, bad.field)
		}
	}
	if err := deleteResource(ctx, b, r.ID); err != nil {
		t.Fatal(err)
	}
	events = latestEvent(t, b)
	if err := b.RecordRepairs(ctx, r.ID, []string{"too late"}); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("record repairs of a deleted resource: %v; want ErrNotFound", err)
	}
	if got := eventsSince(t, b, events); len(got) != 0 {
		t.Errorf("repairs of a deleted resource recorded %q", got)
	}
}
