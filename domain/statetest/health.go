package statetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// provisioned creates a resource and brings it to ready at generation 1 as the provisioner
// would.
func provisioned(t *testing.T, b *Backend, name string) domain.Resource {
	t.Helper()
	r := mustCreate(t, b, runtime(name))
	mustExec(t, b, `UPDATE resources SET status = 'ready', status_message = 'ready at generation 1', observed_generation = 1,
		state = '{"host": "http://a"}' WHERE id = $1`, r.ID)
	return mustGet(t, b, r.ID)
}

// checkedAt is a check by agent "checker" of a row at generation that was never claimed.
func checkedAt(generation int64) domain.Checked {
	return domain.Checked{Holder: "checker", Generation: generation}
}

func events(t *testing.T, b *Backend, id string, limit int) []domain.Event {
	t.Helper()
	es, err := b.ListEvents(testContext(t), id, limit)
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return es
}

// describe renders events as "kind status message" lines.
func describe(es []domain.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s %s %s", e.Kind, e.Status, e.Message)
	}
	return out
}

func testRecordHealth(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := provisioned(t, b, "web")
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	got, err := b.RecordHealth(ctx, r.ID, checkedAt(1), domain.HealthUpdate{
		Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed, StatusMessage: "health check failing since then: 503", UnhealthySince: since,
		State: map[string]any{"host": "http://b"}, Config: map[string]any{"host": "http://b"},
		Repairs: []string{"slot reservation was missing; reserved again on http://b"},
	})
	if err != nil {
		t.Fatalf("record unhealthy: %v", err)
	}
	if got.Status != domain.StatusUnhealthy || got.UnhealthySince == nil || !got.UnhealthySince.Equal(since) ||
		got.State["host"] != "http://b" || got.Config["host"] != "http://b" || got.StatusMessage != "health check failing since then: 503" {
		t.Fatalf("after unhealthy: %+v", got)
	}
	// Still failing, with another error: the first since stays and no event is added.
	got, err = b.RecordHealth(ctx, r.ID, checkedAt(1), domain.HealthUpdate{
		Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed, StatusMessage: "health check failing since then: timeout", UnhealthySince: since.Add(time.Minute),
	})
	if err != nil || !got.UnhealthySince.Equal(since) || got.State["host"] != "http://b" {
		t.Fatalf("still unhealthy: %+v, %v; want since kept and state untouched", got, err)
	}
	got, err = b.RecordHealth(ctx, r.ID, checkedAt(1), domain.HealthUpdate{Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "ready at generation 1: healthy again"})
	if err != nil || got.Status != domain.StatusReady || got.UnhealthySince != nil {
		t.Fatalf("ready again: %+v, %v", got, err)
	}
	// A message change outside a health check is recorded as such.
	mustExec(t, b, `UPDATE resources SET status_message = 'ready at generation 1: checked by hand' WHERE id = $1`, r.ID)

	want := []string{
		"status pending created",
		"status ready ready at generation 1",
		"health unhealthy health check failing since then: 503",
		"repair unhealthy slot reservation was missing; reserved again on http://b",
		"health ready ready at generation 1: healthy again",
		"status ready ready at generation 1: checked by hand",
	}
	if got := describe(events(t, b, r.ID, 0)); !slices.Equal(got, want) {
		t.Errorf("events =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := describe(events(t, b, r.ID, 2)); !slices.Equal(got, want[4:]) {
		t.Errorf("newest 2 events = %v, want %v (oldest first)", got, want[4:])
	}
}

// Whoever moves a resource out of the unhealthy status, plain SQL included, clears the time
// it became unhealthy; a write that leaves it unhealthy keeps it.
func testUnhealthySinceFollowsTheStatus(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := provisioned(t, b, "web")
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := b.RecordHealth(ctx, r.ID, checkedAt(1), domain.HealthUpdate{
		Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed, StatusMessage: "down", UnhealthySince: since,
	}); err != nil {
		t.Fatalf("record unhealthy: %v", err)
	}
	mustExec(t, b, `UPDATE resources SET status_message = 'down: looked at by hand' WHERE id = $1`, r.ID)
	if got := mustGet(t, b, r.ID); got.Status != domain.StatusUnhealthy || got.UnhealthySince == nil || !got.UnhealthySince.Equal(since) {
		t.Fatalf("after a write that left it unhealthy: status %s, unhealthy since %v; want unhealthy since %s", got.Status, got.UnhealthySince, since)
	}
	mustExec(t, b, `UPDATE resources SET status = 'ready', reason = 'Available', status_message = 'up again by hand' WHERE id = $1`, r.ID)
	if got := mustGet(t, b, r.ID); got.Status != domain.StatusReady || got.UnhealthySince != nil {
		t.Fatalf("after a write that made it ready: status %s, unhealthy since %v; want ready and no time", got.Status, got.UnhealthySince)
	}
}

func testRecordHealthLosesToArgsChangesAndDeletes(t *testing.T, b *Backend) {
	ctx := testContext(t)
	unhealthy := domain.HealthUpdate{Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed, StatusMessage: "failing", UnhealthySince: time.Now()}

	changed := provisioned(t, b, "changed")
	if _, err := b.UpdateResourceArgs(ctx, changed.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatal(err)
	}
	deleting := provisioned(t, b, "deleting")
	if _, err := b.RequestDelete(ctx, deleting.ID); err != nil {
		t.Fatal(err)
	}
	pending := mustCreate(t, b, runtime("pending"))
	// A check in flight when the resource was paused records nothing: a paused resource is
	// left alone, health included.
	paused := provisioned(t, b, "paused")
	if _, err := b.SetPaused(ctx, paused.ID, true); err != nil {
		t.Fatal(err)
	}
	for _, r := range []domain.Resource{changed, deleting, pending, paused} {
		_, err := b.RecordHealth(ctx, r.ID, checkedAt(1), unhealthy)
		if !errors.Is(err, domain.ErrStale) {
			t.Errorf("record health of %s: %v, want ErrStale", r.Name, err)
		}
		if cur := mustGet(t, b, r.ID); cur.Status == domain.StatusUnhealthy {
			t.Errorf("%s became unhealthy", r.Name)
		}
	}
	// An old generation is stale even when the row is ready again at a newer one.
	mustExec(t, b, `UPDATE resources SET status = 'ready', observed_generation = generation WHERE id = $1`, changed.ID)
	if _, err := b.RecordHealth(ctx, changed.ID, checkedAt(1), unhealthy); !errors.Is(err, domain.ErrStale) {
		t.Errorf("record health at an old generation: %v, want ErrStale", err)
	}
	if _, err := b.RecordHealth(ctx, changed.ID, checkedAt(2), unhealthy); err != nil {
		t.Errorf("record health at the current generation: %v", err)
	}
	if _, err := b.RecordHealth(ctx, missingID, checkedAt(1), unhealthy); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("record health of a missing resource: %v, want ErrNotFound", err)
	}
	for _, status := range []domain.Status{domain.StatusPending, domain.StatusProvisioning, domain.StatusDeleting} {
		if _, err := b.RecordHealth(ctx, changed.ID, checkedAt(2), domain.HealthUpdate{Status: status}); err == nil || !strings.Contains(err.Error(), "ready, unhealthy or error") {
			t.Errorf("record health with status %s: %v, want a field error", status, err)
		}
	}
	if _, err := b.RecordHealth(ctx, changed.ID, checkedAt(2), domain.HealthUpdate{Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed}); err == nil {
		t.Error("record unhealthy without a time it started: nil error")
	}
	// Leaving unhealthy by any writer clears unhealthy_since.
	if _, err := b.UpdateResourceArgs(ctx, changed.ID, map[string]any{"slots": 3}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, b, `UPDATE resources SET status = 'provisioning' WHERE id = $1`, changed.ID)
	if cur := mustGet(t, b, changed.ID); cur.UnhealthySince != nil {
		t.Errorf("unhealthy_since = %v after the resource left unhealthy, want nil", cur.UnhealthySince)
	}
	// A refused health write leaves nothing behind: the next status change by another
	// writer is an ordinary one.
	if got := describe(events(t, b, changed.ID, 1)); len(got) != 1 || !strings.HasPrefix(got[0], "status provisioning") {
		t.Errorf("newest event = %v, want a status event", got)
	}
}

func testEventsRecordEveryStatusChange(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	lease := mustClaim(t, b, r.ID, "agent")
	record := func(u domain.ProgressUpdate) {
		t.Helper()
		if _, err := b.RecordProgress(ctx, r.ID, lease, u); err != nil {
			t.Fatal(err)
		}
	}
	record(domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "provisioning generation 1"})
	// The same status and message again (a lease renewal, attempts only) is no event.
	record(domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "provisioning generation 1"})
	record(domain.ProgressUpdate{Generation: 1, Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity, StatusMessage: "waiting for capacity: no room", Attempts: 1})
	record(domain.ProgressUpdate{Generation: 1, Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "args.slots: bad", Attempts: 2})
	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.FinalizeDelete(ctx, r.ID, mustClaim(t, b, r.ID, "agent")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"status pending created",
		"status provisioning provisioning generation 1",
		"error pending waiting for capacity: no room",
		"error error args.slots: bad",
		"status deleting delete requested",
		"status deleting removed",
	}
	// The history outlives the row until it is pruned.
	es := events(t, b, r.ID, 0)
	if got := describe(es); !slices.Equal(got, want) {
		t.Fatalf("events =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq || es[i].At.Before(es[i-1].At) || es[i].ResourceID != r.ID {
			t.Errorf("event %d out of order: %+v after %+v", i, es[i], es[i-1])
		}
	}

	other := mustCreate(t, b, runtime("other"))
	mustExec(t, b, `UPDATE resource_events SET at = $2 WHERE resource_id = $1`, r.ID, time.Now().Add(-8*24*time.Hour))
	pruned, err := b.PruneEvents(ctx, leaderTerm(t, b, "leader"), 7*24*time.Hour)
	if err != nil || pruned != int64(len(want)) {
		t.Fatalf("prune events = %d, %v; want %d", pruned, err, len(want))
	}
	if left := events(t, b, other.ID, 0); len(left) != 1 {
		t.Errorf("prune removed newer events: %v", describe(left))
	}
}

func testListCheckablePages(t *testing.T, b *Backend) {
	ctx := testContext(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, provisioned(t, b, fmt.Sprintf("r%d", i)).ID)
	}
	mustExec(t, b, `UPDATE resources SET status = 'unhealthy', unhealthy_since = $2 WHERE id = $1`, ids[1], time.Now())
	mustCreate(t, b, runtime("pending"))
	behind := provisioned(t, b, "behind")
	if _, err := b.UpdateResourceArgs(ctx, behind.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)

	var got []string
	after := ""
	for pages := 0; ; pages++ {
		page, err := b.ListCheckable(ctx, after, 2, "agent-a")
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			if pages != 3 {
				t.Errorf("read %d pages of 2, want 3", pages)
			}
			break
		}
		for _, r := range page {
			got = append(got, r.ID)
		}
		after = page[len(page)-1].ID
	}
	if !slices.Equal(got, ids) {
		t.Errorf("paged ids = %v, want the ready and unhealthy ones in id order %v", got, ids)
	}
	if _, err := b.ListCheckable(ctx, "", 0, "agent-a"); err == nil {
		t.Error("ListCheckable with limit 0: nil error")
	}
	var field *domain.FieldError
	if _, err := b.ListCheckable(ctx, "", 2, ""); !errors.As(err, &field) || field.Field != "holder" {
		t.Errorf("ListCheckable with no holder: err = %v, want a holder field error", err)
	}

	counts, err := b.CountResourcesByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[domain.Status]int{domain.StatusReady: 5, domain.StatusUnhealthy: 1, domain.StatusPending: 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("counts = %v, want %v", counts, want)
	}
}

func testListWaitingForCapacity(t *testing.T, b *Backend) {
	ctx := testContext(t)
	second := mustCreate(t, b, runtime("second"))
	first := mustCreate(t, b, runtime("first"))
	mustCreate(t, b, runtime("plain-pending"))
	// Ordered by how long each has waited, not by age: first was created last.
	mustExec(t, b, `UPDATE resources SET status_message = 'waiting for capacity: no host has room', reason = 'WaitingForCapacity', waiting_since = $2
		WHERE id IN ($1, $3)`, first.ID, time.Now().Add(-time.Hour), second.ID)
	mustExec(t, b, `UPDATE resources SET waiting_since = $2 WHERE id = $1`, second.ID, time.Now().Add(-time.Minute))
	got, err := b.ListWaitingForCapacity(ctx, 0)
	if err != nil || len(got) != 2 || got[0].ID != first.ID || got[1].ID != second.ID {
		t.Fatalf("waiting = %+v, %v; want first, then second", got, err)
	}
	if got, _ := b.ListWaitingForCapacity(ctx, 1); len(got) != 1 || got[0].ID != first.ID {
		t.Errorf("waiting, limit 1 = %+v", got)
	}
}

// A resource another agent is reconciling (its lease live and someone else's) is left out of
// the checkable pages; one leased by the lister itself, one whose lease expired and one never
// leased are listed. Each agent on the database sees the other's leases.
func testListCheckableSkipsOthersLeases(t *testing.T, b *Backend) {
	ctx := testContext(t)
	none := provisioned(t, b, "none")
	mine := provisioned(t, b, "mine")
	theirs := provisioned(t, b, "theirs")
	expired := provisioned(t, b, "expired")
	other := b.Reopen(t)
	if _, err := b.ClaimResource(ctx, mine.ID, "agent-a", ttl); err != nil {
		t.Fatalf("claim by a: %v", err)
	}
	theirsLease := mustClaim(t, other, theirs.ID, "agent-b")
	if _, err := other.ClaimResource(ctx, expired.ID, "agent-b", ttl); err != nil {
		t.Fatalf("claim by b: %v", err)
	}
	mustExec(t, b, `UPDATE resources SET lease_expires_at = $2 WHERE id = $1`, expired.ID, time.Now().Add(-time.Second))

	list := func(st domain.HealthStore, holder string) []string {
		t.Helper()
		page, err := st.ListCheckable(ctx, "", 10, holder)
		if err != nil {
			t.Fatalf("list checkable for %s: %v", holder, err)
		}
		ids := make([]string, len(page))
		for i, r := range page {
			ids[i] = r.ID
		}
		return ids
	}
	sorted := func(ids ...string) []string {
		slices.Sort(ids)
		return ids
	}
	if got, want := list(b, "agent-a"), sorted(none.ID, mine.ID, expired.ID); !slices.Equal(got, want) {
		t.Errorf("agent-a lists %v, want %v (all but the one agent-b is reconciling)", got, want)
	}
	if got, want := list(other, "agent-b"), sorted(none.ID, theirs.ID, expired.ID); !slices.Equal(got, want) {
		t.Errorf("agent-b lists %v, want %v (all but the one agent-a is reconciling)", got, want)
	}
	// Once the lease is given up the resource is checkable again, by anyone.
	if err := other.ReleaseResource(ctx, theirs.ID, theirsLease); err != nil {
		t.Fatal(err)
	}
	if got, want := list(b, "agent-a"), sorted(none.ID, mine.ID, theirs.ID, expired.ID); !slices.Equal(got, want) {
		t.Errorf("after agent-b released its lease agent-a lists %v, want %v", got, want)
	}
}
