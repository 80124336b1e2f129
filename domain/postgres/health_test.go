package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
)

// provisioned creates a resource and brings it to ready at generation 1 as the provisioner
// would.
func provisioned(t *testing.T, st *postgres.State, name string) domain.Resource {
	t.Helper()
	r := mustCreate(t, st, runtime(name))
	mustExec(t, st, `UPDATE resources SET status = 'ready', status_message = 'ready at generation 1', observed_generation = 1,
		state = '{"host": "http://a"}' WHERE id = $1`, r.ID)
	r, err := st.GetResource(testContext(t), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func events(t *testing.T, st *postgres.State, id string, limit int) []domain.Event {
	t.Helper()
	es, err := st.ListEvents(testContext(t), id, limit)
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

func TestRecordHealth(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := provisioned(t, st, "web")
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	got, err := st.RecordHealth(ctx, r.ID, 1, domain.HealthUpdate{
		Status: domain.StatusUnhealthy, StatusMessage: "health check failing since then: 503", UnhealthySince: since,
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
	got, err = st.RecordHealth(ctx, r.ID, 1, domain.HealthUpdate{
		Status: domain.StatusUnhealthy, StatusMessage: "health check failing since then: timeout", UnhealthySince: since.Add(time.Minute),
	})
	if err != nil || !got.UnhealthySince.Equal(since) || got.State["host"] != "http://b" {
		t.Fatalf("still unhealthy: %+v, %v; want since kept and state untouched", got, err)
	}
	got, err = st.RecordHealth(ctx, r.ID, 1, domain.HealthUpdate{Status: domain.StatusReady, StatusMessage: "ready at generation 1: healthy again"})
	if err != nil || got.Status != domain.StatusReady || got.UnhealthySince != nil {
		t.Fatalf("ready again: %+v, %v", got, err)
	}

	want := []string{
		"status pending created",
		"status ready ready at generation 1",
		"health unhealthy health check failing since then: 503",
		"repair unhealthy slot reservation was missing; reserved again on http://b",
		"health ready ready at generation 1: healthy again",
	}
	if got := describe(events(t, st, r.ID, 0)); !slices.Equal(got, want) {
		t.Errorf("events =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := describe(events(t, st, r.ID, 2)); !slices.Equal(got, want[3:]) {
		t.Errorf("newest 2 events = %v, want %v (oldest first)", got, want[3:])
	}
}

func TestRecordHealthLosesToArgsChangesAndDeletes(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	unhealthy := domain.HealthUpdate{Status: domain.StatusUnhealthy, StatusMessage: "failing", UnhealthySince: time.Now()}

	changed := provisioned(t, st, "changed")
	if _, err := st.UpdateResourceArgs(ctx, changed.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatal(err)
	}
	deleting := provisioned(t, st, "deleting")
	if _, err := st.RequestDelete(ctx, deleting.ID); err != nil {
		t.Fatal(err)
	}
	pending := mustCreate(t, st, runtime("pending"))
	for _, r := range []domain.Resource{changed, deleting, pending} {
		_, err := st.RecordHealth(ctx, r.ID, 1, unhealthy)
		if !errors.Is(err, domain.ErrStale) {
			t.Errorf("record health of %s: %v, want ErrStale", r.Name, err)
		}
		cur, _ := st.GetResource(ctx, r.ID)
		if cur.Status == domain.StatusUnhealthy {
			t.Errorf("%s became unhealthy", r.Name)
		}
	}
	// An old generation is stale even when the row is ready again at a newer one.
	mustExec(t, st, `UPDATE resources SET status = 'ready', observed_generation = generation WHERE id = $1`, changed.ID)
	if _, err := st.RecordHealth(ctx, changed.ID, 1, unhealthy); !errors.Is(err, domain.ErrStale) {
		t.Errorf("record health at an old generation: %v, want ErrStale", err)
	}
	if _, err := st.RecordHealth(ctx, changed.ID, 2, unhealthy); err != nil {
		t.Errorf("record health at the current generation: %v", err)
	}
	if _, err := st.RecordHealth(ctx, "00000000-0000-4000-8000-000000000000", 1, unhealthy); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("record health of a missing resource: %v, want ErrNotFound", err)
	}
	if _, err := st.RecordHealth(ctx, changed.ID, 2, domain.HealthUpdate{Status: domain.StatusError}); err == nil || !strings.Contains(err.Error(), "ready or unhealthy") {
		t.Errorf("record health with status error: %v, want a field error", err)
	}
	// Leaving unhealthy by any writer clears unhealthy_since.
	if _, err := st.UpdateResourceArgs(ctx, changed.ID, map[string]any{"slots": 3}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, st, `UPDATE resources SET status = 'provisioning' WHERE id = $1`, changed.ID)
	if cur, _ := st.GetResource(ctx, changed.ID); cur.UnhealthySince != nil {
		t.Errorf("unhealthy_since = %v after the resource left unhealthy, want nil", cur.UnhealthySince)
	}
}

func TestEventsRecordEveryStatusChange(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, runtime("web"))
	if _, err := st.ClaimResource(ctx, r.ID, "agent", ttl); err != nil {
		t.Fatal(err)
	}
	record := func(u domain.ProgressUpdate) {
		t.Helper()
		if _, err := st.RecordProgress(ctx, r.ID, "agent", u); err != nil {
			t.Fatal(err)
		}
	}
	record(domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, StatusMessage: "provisioning generation 1"})
	// The same status and message again (a lease renewal, attempts only) is no event.
	record(domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, StatusMessage: "provisioning generation 1"})
	record(domain.ProgressUpdate{Generation: 1, Status: domain.StatusPending, StatusMessage: "waiting for capacity: no room", Attempts: 1})
	record(domain.ProgressUpdate{Generation: 1, Status: domain.StatusError, StatusMessage: "args.slots: bad", Attempts: 2})
	if _, err := st.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimResource(ctx, r.ID, "agent", ttl); err != nil {
		t.Fatal(err)
	}
	if err := st.FinalizeDelete(ctx, r.ID, "agent"); err != nil {
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
	es := events(t, st, r.ID, 0)
	if got := describe(es); !slices.Equal(got, want) {
		t.Fatalf("events =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq || es[i].At.Before(es[i-1].At) || es[i].ResourceID != r.ID {
			t.Errorf("event %d out of order: %+v after %+v", i, es[i], es[i-1])
		}
	}

	other := mustCreate(t, st, runtime("other"))
	mustExec(t, st, `UPDATE resource_events SET at = now() - interval '8 days' WHERE resource_id = $1`, r.ID)
	pruned, err := st.PruneEvents(ctx, time.Now().Add(-7*24*time.Hour))
	if err != nil || pruned != int64(len(want)) {
		t.Fatalf("prune events = %d, %v; want %d", pruned, err, len(want))
	}
	if left := events(t, st, other.ID, 0); len(left) != 1 {
		t.Errorf("prune removed newer events: %v", describe(left))
	}
}

func TestListCheckablePages(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, provisioned(t, st, fmt.Sprintf("r%d", i)).ID)
	}
	mustExec(t, st, `UPDATE resources SET status = 'unhealthy' WHERE id = $1`, ids[1])
	mustCreate(t, st, runtime("pending"))
	behind := provisioned(t, st, "behind")
	if _, err := st.UpdateResourceArgs(ctx, behind.ID, map[string]any{"slots": 2}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)

	var got []string
	after := ""
	for pages := 0; ; pages++ {
		page, err := st.ListCheckable(ctx, after, 2)
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
	if _, err := st.ListCheckable(ctx, "", 0); err == nil {
		t.Error("ListCheckable with limit 0: nil error")
	}

	counts, err := st.CountResourcesByStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[domain.Status]int{domain.StatusReady: 5, domain.StatusUnhealthy: 1, domain.StatusPending: 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("counts = %v, want %v", counts, want)
	}
}

func TestListWaitingForCapacity(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	second := mustCreate(t, st, runtime("second"))
	first := mustCreate(t, st, runtime("first"))
	mustCreate(t, st, runtime("plain-pending"))
	mustExec(t, st, `UPDATE resources SET status_message = 'waiting for capacity: no host has room' WHERE id IN ($1, $2)`, first.ID, second.ID)
	mustExec(t, st, `UPDATE resources SET created_at = now() - interval '1 hour' WHERE id = $1`, first.ID)
	got, err := st.ListWaitingForCapacity(ctx, 0)
	if err != nil || len(got) != 2 || got[0].ID != first.ID || got[1].ID != second.ID {
		t.Fatalf("waiting = %+v, %v; want first, then second", got, err)
	}
	if got, _ := st.ListWaitingForCapacity(ctx, 1); len(got) != 1 || got[0].ID != first.ID {
		t.Errorf("waiting, limit 1 = %+v", got)
	}
}

func TestCapacityHistoryAndWarnings(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sample := func(at time.Time, prov, host string, total, used int64, down bool) domain.CapacitySample {
		return domain.CapacitySample{At: at, Provisioner: prov, Host: host, Unit: "slots", Total: total, Used: used, Down: down}
	}
	for i, used := range []int64{2, 6, 4} {
		at := t0.Add(time.Duration(i) * time.Minute)
		err := st.RecordCapacity(ctx, []domain.CapacitySample{
			sample(at, "pool", "", 10, used, false),
			sample(at, "pool", "http://a", 6, used, false),
			sample(at, "pool", "http://b", 4, 0, i == 2),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RecordCapacity(ctx, []domain.CapacitySample{sample(t0, "other", "", 3, 1, false)}); err != nil {
		t.Fatal(err)
	}
	// Recording the same sample twice keeps the first.
	if err := st.RecordCapacity(ctx, []domain.CapacitySample{sample(t0, "other", "", 3, 3, false)}); err != nil {
		t.Fatal(err)
	}

	latest, err := st.LatestCapacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newest := t0.Add(2 * time.Minute)
	wantLatest := []domain.CapacitySample{
		sample(t0, "other", "", 3, 1, false),
		sample(newest, "pool", "", 10, 4, false),
		sample(newest, "pool", "http://a", 6, 4, false),
		sample(newest, "pool", "http://b", 4, 0, true),
	}
	if !equalSamples(latest, wantLatest) {
		t.Errorf("latest =\n%+v\nwant\n%+v", latest, wantLatest)
	}

	trends, err := st.CapacityTrends(ctx, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(trends) != 3 {
		t.Fatalf("trends = %+v, want the pool's total and two hosts (other's sample is older)", trends)
	}
	total := trends[0]
	if total.Provisioner != "pool" || total.Host != "" || total.Samples != 2 || total.MinUsed != 4 || total.MaxUsed != 6 ||
		!total.Oldest.At.Equal(t0.Add(time.Minute)) || total.Oldest.Used != 6 || !total.Newest.At.Equal(newest) || total.Newest.Used != 4 || total.Unit != "slots" {
		t.Errorf("pool total trend = %+v", total)
	}
	if b := trends[2]; b.Host != "http://b" || b.Oldest.Down || !b.Newest.Down {
		t.Errorf("host b trend = %+v, want it down only in the newest sample", b)
	}

	pruned, err := st.PruneCapacitySamples(ctx, t0.Add(time.Minute))
	if err != nil || pruned != 4 {
		t.Errorf("prune samples before t0+1m = %d, %v; want 4", pruned, err)
	}

	warn := func(active bool, msg string, at time.Time) bool {
		t.Helper()
		changed, err := st.SetCapacityWarning(ctx, domain.CapacityWarning{Provisioner: "pool", Kind: "total", Active: active, Message: msg, Since: at})
		if err != nil {
			t.Fatal(err)
		}
		return changed
	}
	if warn(false, "", t0) {
		t.Error("a new inactive warning counts as a change")
	}
	if !warn(true, "85% used", t0.Add(time.Minute)) {
		t.Error("raising the warning is not a change")
	}
	if warn(true, "90% used", t0.Add(2*time.Minute)) {
		t.Error("staying raised is a change")
	}
	ws, err := st.ListCapacityWarnings(ctx)
	if err != nil || len(ws) != 1 || !ws[0].Active || ws[0].Message != "90% used" || !ws[0].Since.Equal(t0.Add(time.Minute)) {
		t.Fatalf("warnings = %+v, %v; want active since the first crossing with the newest message", ws, err)
	}
	if !warn(false, "50% used", t0.Add(3*time.Minute)) {
		t.Error("clearing the warning is not a change")
	}
	if ws, _ := st.ListCapacityWarnings(ctx); ws[0].Active || !ws[0].Since.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("after clearing: %+v", ws)
	}
}

func equalSamples(a, b []domain.CapacitySample) bool {
	return slices.EqualFunc(a, b, func(x, y domain.CapacitySample) bool {
		return x.At.Equal(y.At) && x.Provisioner == y.Provisioner && x.Host == y.Host && x.Unit == y.Unit &&
			x.Total == y.Total && x.Used == y.Used && x.Down == y.Down
	})
}

func TestGetReservation(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, runtime("web"))
	if _, err := st.GetReservation(ctx, "pool", r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("reservation before reserving: %v, want ErrNotFound", err)
	}
	pick := func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		return "http://a", nil
	}
	if _, err := st.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: r.ID, Owner: "alice", Slots: 2}, pick); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetReservation(ctx, "pool", r.ID)
	want := domain.Reservation{Provisioner: "pool", ResourceID: r.ID, Owner: "alice", Host: "http://a", Slots: 2}
	if err != nil || got != want {
		t.Errorf("reservation = %+v, %v; want %+v", got, err, want)
	}
	if _, err := st.GetReservation(ctx, "other", r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("reservation of another provisioner: %v, want ErrNotFound", err)
	}
}
