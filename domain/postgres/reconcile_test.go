package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

const ttl = time.Minute

func TestResourcesNeedingAttention(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	pending := mustCreate(t, st, runtime("pending"))
	ready := mustCreate(t, st, runtime("ready"))
	drifted := mustCreate(t, st, runtime("drifted"))
	failed := mustCreate(t, st, runtime("failed"))
	deleting := mustCreate(t, st, runtime("deleting"))
	mustExec(t, st, `UPDATE resources SET status = 'ready', observed_generation = generation WHERE id IN ($1, $2)`, ready.ID, drifted.ID)
	mustExec(t, st, `UPDATE resources SET args = '{"slots": 2}' WHERE id = $1`, drifted.ID)
	mustExec(t, st, `UPDATE resources SET status = 'error', observed_generation = generation WHERE id = $1`, failed.ID)
	mustExec(t, st, `UPDATE resources SET next_attempt_at = '2030-01-02T03:04:05Z' WHERE id = $1`, pending.ID)
	if _, err := st.RequestDelete(ctx, deleting.ID); err != nil {
		t.Fatal(err)
	}

	got, err := st.ResourcesNeedingAttention(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{pending.ID: true, drifted.ID: true, failed.ID: true, deleting.ID: true}
	if len(got) != len(want) {
		t.Fatalf("attention = %+v, want %d resources", got, len(want))
	}
	for _, a := range got {
		if !want[a.ID] {
			t.Errorf("attention lists %s, which needs none (ready is %s)", a.ID, ready.ID)
		}
		if a.ID == pending.ID {
			if a.NotBefore == nil || !a.NotBefore.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
				t.Errorf("pending NotBefore = %v, want its next_attempt_at", a.NotBefore)
			}
		} else if a.NotBefore != nil {
			t.Errorf("%s NotBefore = %v, want nil", a.ID, a.NotBefore)
		}
	}
}

func TestLeaseContentionAndExpiry(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, runtime("web"))
	seq := latestSeq(t, st)

	claimed, err := st.ClaimResource(ctx, r.ID, "agent-a", ttl)
	if err != nil || claimed.ID != r.ID {
		t.Fatalf("claim by a = %+v, %v", claimed, err)
	}
	_, err = st.ClaimResource(ctx, r.ID, "agent-b", ttl)
	expectLeaseHeld(t, err, "agent-a")
	var held *domain.LeaseHeldError
	errors.As(err, &held)
	if until := time.Until(held.ExpiresAt); until < ttl-10*time.Second || until > ttl+10*time.Second {
		t.Fatalf("lease expires in %v, want about %v", until, ttl)
	}
	if _, err := st.ClaimResource(ctx, r.ID, "agent-a", ttl); err != nil {
		t.Fatalf("renew by a: %v", err)
	}

	mustExec(t, st, `UPDATE resources SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, r.ID)
	if _, err := st.ClaimResource(ctx, r.ID, "agent-b", ttl); err != nil {
		t.Fatalf("claim by b after a's lease expired: %v", err)
	}
	_, err = st.ClaimResource(ctx, r.ID, "agent-a", ttl)
	expectLeaseHeld(t, err, "agent-b")

	if err := st.ReleaseResource(ctx, r.ID, "agent-a"); err != nil {
		t.Fatalf("release by a non-holder: %v", err)
	}
	_, err = st.ClaimResource(ctx, r.ID, "agent-a", ttl)
	expectLeaseHeld(t, err, "agent-b")
	if err := st.ReleaseResource(ctx, r.ID, "agent-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimResource(ctx, r.ID, "agent-a", ttl); err != nil {
		t.Fatalf("claim by a after b released: %v", err)
	}

	got, err := st.GetResource(ctx, r.ID)
	if err != nil || got.Generation != 1 {
		t.Fatalf("after lease traffic: %+v, %v; want generation 1", got, err)
	}
	if ids := changesSince(t, st, seq); len(ids) != 0 {
		t.Fatalf("lease writes logged %v, want nothing", ids)
	}
	if _, err := st.ClaimResource(ctx, "00000000-0000-0000-0000-000000000000", "agent-a", ttl); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("claim of a missing resource: err = %v, want ErrNotFound", err)
	}
}

func TestRecordProgress(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, runtime("web"))
	if _, err := st.ClaimResource(ctx, r.ID, "agent-a", ttl); err != nil {
		t.Fatal(err)
	}
	seq := latestSeq(t, st)

	provisioning, err := st.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusProvisioning, StatusMessage: "placing",
		Provisioner: "static", State: map[string]any{"host": "h1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if provisioning.Provisioner != "static" || provisioning.State["host"] != "h1" || provisioning.ReadyAt != nil {
		t.Fatalf("after provisioning progress: %+v", provisioning)
	}
	observed := int64(1)
	ready, err := st.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusReady, Config: map[string]any{"host": "h1"}, ObservedGeneration: &observed,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ready.UpToDate() || ready.ReadyAt == nil || ready.State["host"] != "h1" || ready.Config["host"] != "h1" || ready.Provisioner != "static" {
		t.Fatalf("after ready progress: %+v, want up to date with state, config and provisioner kept", ready)
	}
	again, err := st.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady})
	if err != nil || again.ReadyAt == nil || !again.ReadyAt.Equal(*ready.ReadyAt) || again.ObservedGeneration != 1 {
		t.Fatalf("second ready = %+v, %v; want ready_at and observed generation kept", again, err)
	}
	if ids := changesSince(t, st, seq); len(ids) != 0 {
		t.Fatalf("progress writes logged %v, want nothing", ids)
	}

	if _, err := st.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Provisioner: "other"}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("pinning a different provisioner: err = %v, want ErrStale", err)
	}
	if _, err := st.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 1, Status: "bogus"}); err == nil {
		t.Fatal("an unknown status was recorded")
	}

	if _, err := st.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("progress on an old generation: err = %v, want ErrStale", err)
	}

	mustExec(t, st, `UPDATE resources SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, r.ID)
	_, err = st.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 2, Status: domain.StatusProvisioning})
	expectLeaseHeld(t, err, "agent-a")
	if _, err := st.ClaimResource(ctx, r.ID, "agent-b", ttl); err != nil {
		t.Fatal(err)
	}
	_, err = st.RecordProgress(ctx, r.ID, "agent-a", domain.ProgressUpdate{Generation: 2, Status: domain.StatusProvisioning})
	expectLeaseHeld(t, err, "agent-b")

	if _, err := st.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordProgress(ctx, r.ID, "agent-b", domain.ProgressUpdate{Generation: 2, Status: domain.StatusReady}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("progress on a deleting resource: err = %v, want ErrStale", err)
	}
	deleting, err := st.RecordProgress(ctx, r.ID, "agent-b", domain.ProgressUpdate{
		Generation: 2, Status: domain.StatusDeleting, StatusMessage: "freeing", Attempts: 1, LastError: "busy",
	})
	if err != nil || deleting.Status != domain.StatusDeleting || deleting.Attempts != 1 || deleting.LastError != "busy" {
		t.Fatalf("deleting progress = %+v, %v", deleting, err)
	}

	if _, err := st.RecordProgress(ctx, "00000000-0000-0000-0000-000000000000", "agent-b", domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("progress on a missing resource: err = %v, want ErrNotFound", err)
	}
}

func TestFinalizeDelete(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, runtime("web"))
	if _, err := st.ClaimResource(ctx, r.ID, "agent-a", ttl); err != nil {
		t.Fatal(err)
	}
	if err := st.FinalizeDelete(ctx, r.ID, "agent-a"); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("finalize a resource not deleting: err = %v, want ErrStale", err)
	}
	if _, err := st.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	expectLeaseHeld(t, st.FinalizeDelete(ctx, r.ID, "agent-b"), "agent-a")

	seq := latestSeq(t, st)
	if err := st.FinalizeDelete(ctx, r.ID, "agent-a"); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	if _, err := st.GetResource(ctx, r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after finalize: err = %v, want ErrNotFound", err)
	}
	if ids := changesSince(t, st, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by finalize = %v, want [%s]", ids, r.ID)
	}
	if err := st.FinalizeDelete(ctx, r.ID, "agent-a"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("finalize again: err = %v, want ErrNotFound", err)
	}
}
