package statetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

func testResourcesNeedingAttention(t *testing.T, b *Backend) {
	ctx := testContext(t)
	owned := runtime("pending")
	owned.Owner = "acme"
	pending := mustCreate(t, b, owned)
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

	// Pages of two, in id order, each after the last id of the one before.
	var got []domain.Attention
	for after := ""; ; {
		page, err := b.ResourcesNeedingAttention(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 2 {
			t.Fatalf("page after %q holds %d resources, want at most 2", after, len(page))
		}
		got = append(got, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	want := []string{drifted.ID, failed.ID, deleting.ID, pending.ID, later.ID}
	slices.Sort(want)
	if len(got) != len(want) {
		t.Fatalf("attention = %+v, want %d resources", got, len(want))
	}
	for i, a := range got {
		if a.ID != want[i] {
			t.Errorf("attention[%d] = %s, want %s (ready is %s)", i, a.ID, want[i], ready.ID)
		}
		if wantOwner := map[bool]string{true: "acme", false: "alice"}[a.ID == pending.ID]; a.Owner != wantOwner {
			t.Errorf("%s owner = %q, want %q", a.ID, a.Owner, wantOwner)
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
	var fe *domain.FieldError
	if _, err := b.ResourcesNeedingAttention(ctx, "", 0); !errors.As(err, &fe) || fe.Field != "limit" {
		t.Errorf("a page of 0: %v, want a FieldError naming limit", err)
	}
}

func testLeaseContentionAndExpiry(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	seq := latestSeq(t, b)

	claimed, err := b.ClaimResource(ctx, r.ID, "agent-a", ttl)
	if err != nil || claimed.Resource.ID != r.ID {
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
	leaseB, err := b.ClaimResource(ctx, r.ID, "agent-b", ttl)
	if err != nil {
		t.Fatalf("claim by b after a's lease expired: %v", err)
	}
	_, err = b.ClaimResource(ctx, r.ID, "agent-a", ttl)
	expectLeaseHeld(t, err, "agent-b")

	if err := b.ReleaseResource(ctx, r.ID, domain.Lease{Holder: "agent-a"}); err != nil {
		t.Fatalf("release by a non-holder: %v", err)
	}
	_, err = b.ClaimResource(ctx, r.ID, "agent-a", ttl)
	expectLeaseHeld(t, err, "agent-b")
	if err := b.ReleaseResource(ctx, r.ID, leaseB.Lease); err != nil {
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

var runtimePool = domain.ProvisioningStart{Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}}

// ClaimAndStart on an untouched row leaves the row, and its history, as a claim followed by
// the agent's record of the start of provisioning does.
func testClaimAndStartRecordsWhatRecordProgressWould(t *testing.T, b *Backend) {
	ctx := testContext(t)
	fast := mustCreate(t, b, runtime("fast"))
	slow := mustCreate(t, b, runtime("slow"))
	pinned := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "pinned", Provisioner: "pool"})
	changed := mustCreate(t, b, runtime("changed"))
	if _, err := b.UpdateResourceArgs(ctx, changed.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatal(err)
	}
	seq := latestSeq(t, b)

	for _, r := range []domain.Resource{fast, pinned, changed} {
		c, err := b.ClaimAndStart(ctx, r.ID, "agent-a", ttl, runtimePool)
		got, started := c.Resource, c.Started
		if err != nil || !started {
			t.Fatalf("claim and start %s = %v, %v; want started", r.Name, started, err)
		}
		gen := mustGet(t, b, r.ID).Generation
		if got.Status != domain.StatusProvisioning || got.StatusMessage != domain.ProvisioningMessage(gen) ||
			got.Provisioner != "pool" || got.Generation != gen || got.Attempts != 0 || got.NextAttemptAt != nil {
			t.Fatalf("%s after claim and start: %+v", r.Name, got)
		}
		_, err = b.ClaimResource(ctx, r.ID, "agent-b", ttl)
		expectLeaseHeld(t, err, "agent-a")
	}
	if got := mustGet(t, b, changed.ID); got.StatusMessage != "provisioning generation 2" {
		t.Fatalf("started after an args change: message %q, want it to name generation 2", got.StatusMessage)
	}

	slowLease := mustClaim(t, b, slow.ID, "agent-a")
	if _, err := b.RecordProgress(ctx, slow.ID, slowLease, domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: domain.ProvisioningMessage(1), Provisioner: "pool",
	}); err != nil {
		t.Fatal(err)
	}
	a, c := mustGet(t, b, fast.ID), mustGet(t, b, slow.ID)
	if a.Status != c.Status || a.StatusMessage != c.StatusMessage || a.Provisioner != c.Provisioner || a.Attempts != c.Attempts ||
		a.LastError != c.LastError || (a.NextAttemptAt == nil) != (c.NextAttemptAt == nil) || a.ObservedGeneration != c.ObservedGeneration {
		t.Fatalf("claim and start left %+v; claim and record left %+v", a, c)
	}
	history := func(id string) []string {
		t.Helper()
		events, err := b.ListEvents(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(events))
		for i, e := range events {
			out[i] = fmt.Sprintf("%s %s %q", e.Kind, e.Status, e.Message)
		}
		return out
	}
	if hf, hs := history(fast.ID), history(slow.ID); !slices.Equal(hf, hs) || len(hf) != 2 {
		t.Fatalf("history after claim and start: %v; after claim and record: %v", hf, hs)
	}
	if ids := changesSince(t, b, seq); len(ids) != 0 {
		t.Fatalf("claim and start logged %v, want nothing", ids)
	}
}

// A row that is not untouched, not the start's provisioner's or type, or leased by another
// agent is only claimed (or refused), as ClaimResource would.
func testClaimAndStartLeavesOtherRowsClaimedOnly(t *testing.T, b *Backend) {
	ctx := testContext(t)
	later := time.Now().Add(time.Hour)
	rows := map[string]domain.Resource{
		"clickhouse": mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeClickHouse, Name: "db", Owner: "alice"}),
		"other":      mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "other", Provisioner: "elsewhere"}),
		"retrying":   mustCreate(t, b, runtime("retrying")),
		"waiting":    mustCreate(t, b, runtime("waiting")),
		"failed":     mustCreate(t, b, runtime("failed")),
		"ready":      mustCreate(t, b, runtime("ready")),
		"deleting":   mustCreate(t, b, runtime("deleting")),
		"held":       mustCreate(t, b, runtime("held")),
	}
	mustExec(t, b, `UPDATE resources SET next_attempt_at = $2 WHERE id = $1`, rows["retrying"].ID, later)
	mustExec(t, b, `UPDATE resources SET status_message = 'waiting for capacity: full', reason = 'WaitingForCapacity', waiting_since = $2 WHERE id = $1`,
		rows["waiting"].ID, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	mustExec(t, b, `UPDATE resources SET status = 'error', status_message = 'bad args', reason = 'BrokerError' WHERE id = $1`, rows["failed"].ID)
	mustExec(t, b, `UPDATE resources SET status = 'ready', observed_generation = 1 WHERE id = $1`, rows["ready"].ID)
	if _, err := b.RequestDelete(ctx, rows["deleting"].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClaimResource(ctx, rows["held"].ID, "agent-b", ttl); err != nil {
		t.Fatal(err)
	}

	for name, r := range rows {
		before := mustGet(t, b, r.ID)
		c, err := b.ClaimAndStart(ctx, r.ID, "agent-a", ttl, runtimePool)
		got, started := c.Resource, c.Started
		if name == "held" {
			expectLeaseHeld(t, err, "agent-b")
		} else if err != nil || started {
			t.Fatalf("claim and start %s = %v, %v; want claimed only", name, started, err)
		} else if got.Status != before.Status || got.StatusMessage != before.StatusMessage || got.Provisioner != before.Provisioner {
			t.Fatalf("claim and start changed %s: %+v, was %+v", name, got, before)
		}
		if after := mustGet(t, b, r.ID); after.Status != before.Status || after.StatusMessage != before.StatusMessage {
			t.Fatalf("%s after claim and start: %+v, was %+v", name, after, before)
		}
	}
	_, err := b.ClaimResource(ctx, rows["other"].ID, "agent-b", ttl)
	expectLeaseHeld(t, err, "agent-a")

	if _, err := b.ClaimAndStart(ctx, missingID, "agent-a", ttl, runtimePool); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("claim and start a missing resource: err = %v, want ErrNotFound", err)
	}
	if _, err := b.ClaimAndStart(ctx, rows["ready"].ID, "agent-a", ttl, domain.ProvisioningStart{Types: runtimePool.Types}); err == nil {
		t.Fatal("claim and start without a provisioner succeeded")
	}
}

func testRecordProgress(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	leaseA := mustClaim(t, b, r.ID, "agent-a")
	seq := latestSeq(t, b)

	provisioning, err := b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "placing",
		Provisioner: "static", State: map[string]any{"host": "h1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if provisioning.Provisioner != "static" || provisioning.State["host"] != "h1" || provisioning.ReadyAt != nil {
		t.Fatalf("after provisioning progress: %+v", provisioning)
	}
	failing, err := b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "retrying", Attempts: 2, RetryIn: time.Hour, LastError: "timeout",
	})
	if err != nil || failing.Attempts != 2 || failing.LastError != "timeout" {
		t.Fatalf("after a failed attempt: %+v, %v; want the retry bookkeeping recorded", failing, err)
	}
	expectRetryIn(t, failing, time.Hour)
	observed := int64(1)
	ready, err := b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, Config: map[string]any{"host": "h1"}, ObservedGeneration: &observed,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ready.UpToDate() || ready.ReadyAt == nil || ready.State["host"] != "h1" || ready.Config["host"] != "h1" || ready.Provisioner != "static" ||
		ready.Attempts != 0 || ready.NextAttemptAt != nil {
		t.Fatalf("after ready progress: %+v, want up to date with state, config and provisioner kept", ready)
	}
	again, err := b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable})
	if err != nil || again.ReadyAt == nil || !again.ReadyAt.Equal(*ready.ReadyAt) || again.ObservedGeneration != 1 {
		t.Fatalf("second ready = %+v, %v; want ready_at and observed generation kept", again, err)
	}
	if ids := changesSince(t, b, seq); len(ids) != 0 {
		t.Fatalf("progress writes logged %v, want nothing", ids)
	}

	if _, err := b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, Provisioner: "other"}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("pinning a different provisioner: err = %v, want ErrStale", err)
	}
	if _, err := b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{Generation: 1, Status: "bogus"}); err == nil {
		t.Fatal("an unknown status was recorded")
	}

	if _, err := b.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("progress on an old generation: err = %v, want ErrStale", err)
	}

	mustExec(t, b, `UPDATE resources SET lease_expires_at = $2 WHERE id = $1`, r.ID, time.Now().Add(-time.Second))
	_, err = b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{Generation: 2, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning})
	expectLeaseHeld(t, err, "agent-a")
	leaseB := mustClaim(t, b, r.ID, "agent-b")
	_, err = b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{Generation: 2, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning})
	expectLeaseHeld(t, err, "agent-b")

	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordProgress(ctx, r.ID, leaseB, domain.ProgressUpdate{Generation: 2, Status: domain.StatusReady, Reason: domain.ReasonAvailable}); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("progress on a deleting resource: err = %v, want ErrStale", err)
	}
	deleting, err := b.RecordProgress(ctx, r.ID, leaseB, domain.ProgressUpdate{
		Generation: 2, Status: domain.StatusDeleting, Reason: domain.ReasonBackoff, StatusMessage: "freeing", Attempts: 1, LastError: "busy",
	})
	if err != nil || deleting.Status != domain.StatusDeleting || deleting.Attempts != 1 || deleting.LastError != "busy" {
		t.Fatalf("deleting progress = %+v, %v", deleting, err)
	}

	if _, err := b.RecordProgress(ctx, missingID, leaseB, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("progress on a missing resource: err = %v, want ErrNotFound", err)
	}
}

// The last record of an attempt can give up the lease in the same write; a refused one
// keeps it.
func testRecordProgressReleasesTheLease(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	leaseA := mustClaim(t, b, r.ID, "agent-a")
	seq := latestSeq(t, b)

	_, err := b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{
		Generation: 2, Status: domain.StatusReady, Reason: domain.ReasonAvailable, ReleaseLease: true,
	})
	if !errors.Is(err, domain.ErrStale) {
		t.Fatalf("releasing record on an old generation: err = %v, want ErrStale", err)
	}
	_, err = b.ClaimResource(ctx, r.ID, "agent-b", ttl)
	expectLeaseHeld(t, err, "agent-a")

	observed := int64(1)
	ready, err := b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{
		Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "ready at generation 1",
		Config: map[string]any{"host": "h1"}, ObservedGeneration: &observed, ReleaseLease: true,
	})
	if err != nil || !ready.UpToDate() || ready.ReadyAt == nil || ready.Config["host"] != "h1" {
		t.Fatalf("releasing ready record = %+v, %v; want the update applied", ready, err)
	}
	_, err = b.RecordProgress(ctx, r.ID, leaseA, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable})
	if !errors.Is(err, domain.ErrLeaseHeld) {
		t.Fatalf("a record after the lease was released: err = %v, want the lease reported lost", err)
	}
	if _, err := b.ClaimResource(ctx, r.ID, "agent-b", ttl); err != nil {
		t.Fatalf("claim by another agent after the releasing record: %v", err)
	}
	if got := mustGet(t, b, r.ID); got.Generation != 1 || got.Status != domain.StatusReady {
		t.Fatalf("after the releasing record and a new claim: %+v", got)
	}
	if ids := changesSince(t, b, seq); len(ids) != 0 {
		t.Fatalf("the releasing record logged %v, want nothing", ids)
	}
}

// A record with a passed step leaves the row and the history as two records, the step's and
// its own, would; a refused one records neither.
func testRecordProgressRecordsThePassedStep(t *testing.T, b *Backend) {
	ctx := testContext(t)
	waiting := domain.StatusStep{Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady, Message: "provisioning generation 1: waiting for it to serve"}
	state := map[string]any{"host": "h1"}
	observed := int64(1)
	ready := func(passed *domain.StatusStep) domain.ProgressUpdate {
		return domain.ProgressUpdate{
			Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "ready at generation 1", State: state,
			Config: map[string]any{"host": "h1"}, ObservedGeneration: &observed, ReleaseLease: true, Passed: passed,
		}
	}
	history := func(id string) []string {
		t.Helper()
		return describe(events(t, b, id, 0))
	}

	twice := mustCreate(t, b, runtime("twice"))
	lease := mustClaim(t, b, twice.ID, "agent-a")
	if _, err := b.RecordProgress(ctx, twice.ID, lease, domain.ProgressUpdate{
		Generation: 1, Status: waiting.Status, Reason: waiting.Reason, StatusMessage: waiting.Message, State: state,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecordProgress(ctx, twice.ID, lease, ready(nil)); err != nil {
		t.Fatal(err)
	}

	once := mustCreate(t, b, runtime("once"))
	lease = mustClaim(t, b, once.ID, "agent-a")
	seq := latestSeq(t, b)
	got, err := b.RecordProgress(ctx, once.ID, lease, ready(&waiting))
	if err != nil {
		t.Fatal(err)
	}
	want := mustGet(t, b, twice.ID)
	if got.Status != want.Status || got.StatusMessage != want.StatusMessage || !got.UpToDate() || got.ReadyAt == nil ||
		got.State["host"] != "h1" || got.Config["host"] != "h1" {
		t.Fatalf("after a record with a passed step: %+v; after two records: %+v", got, want)
	}
	if ho, ht := history(once.ID), history(twice.ID); !slices.Equal(ho, ht) || len(ho) != 3 {
		t.Fatalf("history after a record with a passed step: %v; after two records: %v", ho, ht)
	}
	if ids := changesSince(t, b, seq); len(ids) != 0 {
		t.Fatalf("the record logged %v, want nothing", ids)
	}

	refused := mustCreate(t, b, runtime("refused"))
	lease = mustClaim(t, b, refused.ID, "agent-a")
	before := history(refused.ID)
	stale := ready(&waiting)
	stale.Generation = 2
	if _, err := b.RecordProgress(ctx, refused.ID, lease, stale); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("a record on an old generation: err = %v, want ErrStale", err)
	}
	if _, err := b.RecordProgress(ctx, refused.ID, domain.Lease{Holder: "agent-b", Token: lease.Token}, ready(&waiting)); !errors.Is(err, domain.ErrLeaseHeld) {
		t.Fatalf("a record under another's lease: err = %v, want the lease reported lost", err)
	}
	if after := history(refused.ID); !slices.Equal(after, before) {
		t.Fatalf("refused records changed the history from %v to %v", before, after)
	}
}

func testFinalizeDelete(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	leaseA := mustClaim(t, b, r.ID, "agent-a")
	if err := b.FinalizeDelete(ctx, r.ID, leaseA); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("finalize a resource not deleting: err = %v, want ErrStale", err)
	}
	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	expectLeaseHeld(t, b.FinalizeDelete(ctx, r.ID, domain.Lease{Holder: "agent-b"}), "agent-a")
	if _, err := b.GetResource(ctx, r.ID); err != nil {
		t.Fatalf("a refused finalize removed the row: %v", err)
	}

	seq := latestSeq(t, b)
	if err := b.FinalizeDelete(ctx, r.ID, leaseA); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	if _, err := b.GetResource(ctx, r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after finalize: err = %v, want ErrNotFound", err)
	}
	if ids := changesSince(t, b, seq); len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("changes logged by finalize = %v, want [%s]", ids, r.ID)
	}
	if err := b.FinalizeDelete(ctx, r.ID, leaseA); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("finalize again: err = %v, want ErrNotFound", err)
	}

	// A refused finalize leaves no way to remove the row behind: a direct delete is still
	// a delete request.
	kept := mustCreate(t, b, runtime("kept"))
	keptLease := mustClaim(t, b, kept.ID, "agent-a")
	if err := b.FinalizeDelete(ctx, kept.ID, keptLease); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("finalize a resource not deleting: err = %v, want ErrStale", err)
	}
	mustExec(t, b, `DELETE FROM resources WHERE id = $1`, kept.ID)
	if got := mustGet(t, b, kept.ID); got.Status != domain.StatusDeleting {
		t.Fatalf("direct delete after a refused finalize: status %s, want deleting", got.Status)
	}
}

// expectRetryIn checks that r's next attempt is scheduled d after the write that scheduled
// it, on the database clock: its NextAttemptAt is d after its UpdatedAt, both the
// database's, to the millisecond both stores keep.
func expectRetryIn(t *testing.T, r domain.Resource, d time.Duration) {
	t.Helper()
	if r.NextAttemptAt == nil {
		t.Fatalf("no retry scheduled; want one %s after the write", d)
	}
	if got := r.NextAttemptAt.Sub(r.UpdatedAt); got < d-time.Millisecond || got > d+time.Millisecond {
		t.Errorf("next attempt at %v, %s after the write at %v; want %s after it", r.NextAttemptAt, got, r.UpdatedAt, d)
	}
}
