package statetest

import (
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

func testResourcesNeedingAttention(t *testing.T, b *Backend) {
	ctx := testContext(t)
	pending := mustCreate(t, b, runtime("pending"))
	ready := mustCreate(t, b, runtime("ready"))
	drifted := mustCreate(t, b, runtime("drifted"))
	failed := mustCreate(t, b, runtime("failed"))
	deleting := mustCreate(t, b, runtime("deleting"))
	later := mustCreate(t, b, runtime("later"))
	mustExec(t, b, `UPDATE resources SET status = 'ready', observed_generation = generation WHERE id IN ($1, $2)`, ready.ID, drifted.ID)
	mustExec(t, b, `UPDATE resources SET args = '{"slots": 2}' WHERE id = $1`, drifted.ID)
	mustExec(t, b, `UPDATE resources SET status = 'error', observed_generation = generation WHERE id = $1`, failed.ID)
	// Times in the forms a person writes them, in UTC and with an offset.
	mustExec(t, b, `UPDATE resources SET next_attempt_at = '2030-01-02T03:04:05Z' WHERE id = $1`, pending.ID)
	mustExec(t, b, `UPDATE resources SET next_attempt_at = '2030-01-02 05:04:06+02:00' WHERE id = $1`, later.ID)
	if _, err := b.RequestDelete(ctx, deleting.ID); err != nil {
		t.Fatal(err)
	}

	got, err := b.ResourcesNeedingAttention(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{drifted.ID, failed.ID, deleting.ID, pending.ID, later.ID} // due now, by creation; then by due time
	if len(got) != len(want) {
		t.Fatalf("attention = %+v, want %d resources", got, len(want))
	}
	for i, a := range got {
		if a.ID != want[i] {
			t.Errorf("attention[%d] = %s, want %s (ready is %s)", i, a.ID, want[i], ready.ID)
		}
		switch a.ID {
		case pending.ID:
			if a.NotBefore == nil || !a.NotBefore.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
				t.Errorf("pending NotBefore = %v, want its next_attempt_at", a.NotBefore)
			}
		case later.ID:
			if a.NotBefore == nil || !a.NotBefore.Equal(time.Date(2030, 1, 2, 3, 4, 6, 0, time.UTC)) {
				t.Errorf("later NotBefore = %v, want its next_attempt_at in UTC", a.NotBefore)
			}
		default:
			if a.NotBefore != nil {
				t.Errorf("%s NotBefore = %v, want nil", a.ID, a.NotBefore)
			}
		}
	}
}

func testLeaseContentionAndExpiry(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	seq := latestSeq(t, b)

	claimed, err := b.ClaimResource(ctx, r.ID, "agent-a", ttl)
	if err != nil || claimed.ID != r.ID {
		t.Fatalf("claim by a = %+v, %v", claimed, err)
	}
	_, err = b.ClaimResource(ctx, r.ID, "agent-b", ttl)
	expectLeaseHeld(t, err, "agent-a")
	var held *domain.LeaseHeldError
	errors.As(err, &held)
	if until := time.Until(held.ExpiresAt); until < ttl-10*time.Second || until > ttl+10*time.Second {
		t.Fatalf("lease expires in %v, want about %v", until, ttl)
	}
	if _, err := b.ClaimResource(ctx, r.ID, "agent-a", ttl); err != nil {
		t.Fatalf("renew by a: %v", err)
	}

	mustExec(t, b, `UPDATE resources SET lease_expires_at = $2 WHERE id = $1`, r.ID, time.Now().Add(-time.Second))
	if _, err := b.ClaimResource(ctx, r.ID, "agent-b", ttl); err != nil {
		t.Fatalf("claim by b after a's lease expired: %v", err)
	}
	_, err = b.ClaimResource(ctx, r.ID, "agent-a", ttl)
	expectLeaseHeld(t, err, "agent-b")

	if err := b.ReleaseResource(ctx, r.ID, "agent-a"); err != nil {
		t.Fatalf("release by a non-holder: %v", err)
	}
	_, err = b.ClaimResource(ctx, r.ID, "agent-a", ttl)
	expectLeaseHeld(t, err, "agent-b")
	if err := b.ReleaseResource(ctx, r.ID, "agent-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClaimResource(ctx, r.ID, "agent-a", ttl); err != nil {
		t.Fatalf("claim by a after b released: %v", err)
	}

	// A second agent on the same database sees the lease.
	other := b.Reopen(t)
	_, err = other.ClaimResource(ctx, r.ID, "agent-b", ttl)
	expectLeaseHeld(t, err, "agent-a")

	if got := mustGet(t, b, r.ID); got.Generation != 1 {
		t.Fatalf("after lease traffic: %+v; want generation 1", got)
	}
	if ids := changesSince(t, b, seq); len(ids) != 0 {
		t.Fatalf("lease writes logged %v, want nothing", ids)
	}
	if _, err := b.ClaimResource(ctx, missingID, "agent-a", ttl); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("claim of a missing resource: err = %v, want ErrNotFound", err)
	}
	if _, err := b.ClaimResource(ctx, r.ID, "", ttl); err == nil {
		t.Fatal("claim without a holder succeeded")
	}
	if _, err := b.ClaimResource(ctx, r.ID, "agent-a", 0); err == nil {
		t.Fatal("claim with a zero ttl succeeded")
	}
}

func testRecordProgress(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	if _, err := b.ClaimResource(ctx, r.ID, "agent-a", ttl); err != nil {
		t.Fatal(err)
	}
	seq := latestSeq(t, b)

	provisioning, err := b.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusProvisioning, StatusMessage: "placing",
		Provisioner: "static", State: map[string]any{"host": "h1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if provisioning.Provisioner != "static" || provisioning.State["host"] != "h1" || provisioning.ReadyAt != nil {
		t.Fatalf("after provisioning progress: %+v", provisioning)
	}
	retry := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	failing, err := b.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusProvisioning, StatusMessage: "retrying", Attempts: 2, NextAttemptAt: &retry, LastError: "timeout",
	})
	if err != nil || failing.Attempts != 2 || failing.NextAttemptAt == nil || !failing.NextAttemptAt.Equal(retry) || failing.LastError != "timeout" {
		t.Fatalf("after a failed attempt: %+v, %v; want the retry bookkeeping recorded", failing, err)
	}
	observed := int64(1)
	ready, err := b.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusReady, Config: map[string]any{"host": "h1"}, ObservedGeneration: &observed,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ready.UpToDate() || ready.ReadyAt == nil || ready.State["host"] != "h1" || ready.Config["host"] != "h1" || ready.Provisioner != "static" ||
		ready.Attempts != 0 || ready.NextAttemptAt != nil {
		t.Fatalf("after ready progress: %+v, want up to date with state, config and provisioner kept", ready)
	}
	again, err := b.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady})
	if err != nil || again.ReadyAt == nil || !again.ReadyAt.Equal(*ready.ReadyAt) || again.ObservedGeneration != 1 {
		t.Fatalf("second ready = %+v, %v; want ready_at and observed generation kept", again, err)
	}
	if ids := changesSince(t, b, seq); len(ids) != 0 {
		t.Fatalf("progress writes logged %v, want nothing", ids)
	}

	if _, err := b.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Provisioner: "other"}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("pinning a different provisioner: err = %v, want ErrStale", err)
	}
	if _, err := b.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 1, Status: "bogus"}); err == nil {
		t.Fatal("an unknown status was recorded")
	}

	if _, err := b.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("progress on an old generation: err = %v, want ErrStale", err)
	}

	mustExec(t, b, `UPDATE resources SET lease_expires_at = $2 WHERE id = $1`, r.ID, time.Now().Add(-time.Second))
	_, err = b.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 2, Status: domain.StatusProvisioning})
	expectLeaseHeld(t, err, "agent-a")
	if _, err := b.ClaimResource(ctx, r.ID, "agent-b", ttl); err != nil {
		t.Fatal(err)
	}
	_, err = b.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 2, Status: domain.StatusProvisioning})
	expectLeaseHeld(t, err, "agent-b")

	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordProgress(ctx, r.ID, "agent-b", domain.ProgressUpdate{Generation: 2, Status: domain.StatusReady}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("progress on a deleting resource: err = %v, want ErrStale", err)
	}
	deleting, err := b.RecordProgress(ctx, r.ID, "agent-b", domain.ProgressUpdate{
		Generation: 2, Status: domain.StatusDeleting, StatusMessage: "freeing", Attempts: 1, LastError: "busy",
	})
	if err != nil || deleting.Status != domain.StatusDeleting || deleting.Attempts != 1 || deleting.LastError != "busy" {
		t.Fatalf("deleting progress = %+v, %v", deleting, err)
	}

	if _, err := b.RecordProgress(ctx, missingID, "agent-b", domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("progress on a missing resource: err = %v, want ErrNotFound", err)
	}
}

func testFinalizeDelete(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	if _, err := b.ClaimResource(ctx, r.ID, "agent-a", ttl); err != nil {
		t.Fatal(err)
	}
	if err := b.FinalizeDelete(ctx, r.ID, "agent-a"); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("finalize a resource not deleting: err = %v, want ErrStale", err)
	}
	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	expectLeaseHeld(t, b.FinalizeDelete(ctx, r.ID, "agent-b"), "agent-a")
	if _, err := b.GetResource(ctx, r.ID); err != nil {
		t.Fatalf("a refused finalize removed the row: %v", err)
	}

	seq := latestSeq(t, b)
	if err := b.FinalizeDelete(ctx, r.ID, "agent-a"); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	if _, err := b.GetResource(ctx, r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after finalize: err = %v, want ErrNotFound", err)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by finalize = %v, want [%s]", ids, r.ID)
	}
	if err := b.FinalizeDelete(ctx, r.ID, "agent-a"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("finalize again: err = %v, want ErrNotFound", err)
	}

	// A refused finalize leaves no way to remove the row behind: a direct delete is still
	// a delete request.
	kept := mustCreate(t, b, runtime("kept"))
	if _, err := b.ClaimResource(ctx, kept.ID, "agent-a", ttl); err != nil {
		t.Fatal(err)
	}
	if err := b.FinalizeDelete(ctx, kept.ID, "agent-a"); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("finalize a resource not deleting: err = %v, want ErrStale", err)
	}
	mustExec(t, b, `DELETE FROM resources WHERE id = $1`, kept.ID)
	if got := mustGet(t, b, kept.ID); got.Status != domain.StatusDeleting {
		t.Fatalf("direct delete after a refused finalize: status %s, want deleting", got.Status)
	}
}
