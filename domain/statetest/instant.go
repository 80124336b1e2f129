package statetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// InstantProvision is the reservation that provisions r whole on provisioner "pool" on host
// h1 (SlotRequest.Instant), as the static pool asks for it; recorded, when not nil, gets
// the row as recorded ready. Store-specific tests use it too.
func InstantProvision(r domain.Resource, recorded *domain.Resource) (domain.SlotRequest, domain.PickHost) {
	in := &domain.InstantProvision{
		Generation:  r.Generation,
		Provisioner: "pool",
		Types:       []domain.ResourceType{domain.ResourceTypeRuntime},
		Units:       1,
		Steps: []domain.StatusStep{
			{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, Message: domain.ProvisioningMessage(r.Generation)},
			{Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady, Message: domain.ProvisioningMessage(r.Generation) + ": waiting for it to serve"},
		},
		Message: domain.ReadyMessage(r.Generation, ""),
		Ready: func(res domain.Reservation) (domain.ReadyRecord, error) {
			return domain.ReadyRecord{State: map[string]any{"host": res.Host}, Config: map[string]any{"endpoint": res.Host}}, nil
		},
		Recorded: recorded,
	}
	req := domain.SlotRequest{Provisioner: "pool", ResourceID: r.ID, Owner: r.Owner, Slots: 1, Instant: in, HostSlots: slotsEach(hostCapacity)}
	return req, func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) { return "h1", nil }
}

// A reservation that provisions an untouched resource whole records it ready in the same
// transaction: observed at its generation, admitted, its lease token moved on and no lease
// held, and the history the claim and the records would have written, event for event.
func testInstantProvisionRecordsReady(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("instant"))
	var got domain.Resource
	req, pick := InstantProvision(r, &got)
	res, err := b.ReserveSlots(ctx, req, pick)
	if err != nil {
		t.Fatalf("instant provision: %v", err)
	}
	if res.Host != "h1" || res.Slots != 1 || res.Owner != "alice" {
		t.Errorf("reservation = %+v, want 1 slot of alice on h1", res)
	}
	if got.Status != domain.StatusReady || got.Reason != domain.ReasonAvailable || got.StatusMessage != "ready at generation 1" ||
		got.ObservedGeneration != 1 || got.Provisioner != "pool" || got.ReadyAt == nil || got.LeaseHolder != "" ||
		got.LeaseToken <= r.LeaseToken || got.State["host"] != "h1" || got.Config["endpoint"] != "h1" {
		t.Errorf("recorded row = %+v, want ready at generation 1 on pool, its state and config, no lease, a newer token", got)
	}
	read, err := b.GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if read.Status != got.Status || read.LeaseToken != got.LeaseToken || read.UpdatedAt != got.UpdatedAt {
		t.Errorf("row read back = %+v, want what was recorded %+v", read, got)
	}
	var provisioner string
	var units int64
	if err := b.QueryRow(ctx, `SELECT admitted_provisioner, admitted_units FROM resources WHERE id = $1`, r.ID).Scan(&provisioner, &units); err != nil {
		t.Fatal(err)
	}
	if provisioner != "pool" || units != 1 {
		t.Errorf("admitted on %q at %d, want pool at 1", provisioner, units)
	}
	want := strings.Split(strings.TrimSpace(historyGolden), "\n")[:4]
	if got := describe(events(t, b, r.ID, 0)); !slices.Equal(got, want) {
		t.Errorf("history =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Once ready it is no longer untouched: a second try writes nothing.
	req, pick = InstantProvision(r, nil)
	if _, err := b.ReserveSlots(ctx, req, pick); !errors.Is(err, domain.ErrNotInstant) {
		t.Errorf("instant provision of a ready resource: %v, want ErrNotInstant", err)
	}
	if n := len(events(t, b, r.ID, 0)); n != 4 {
		t.Errorf("%d events after the refused second try, want 4", n)
	}
}

// Only an untouched row, as the caller read it, is provisioned whole: any other is left
// exactly as it was, with no reservation, and the caller is told to take the usual way.
func testInstantProvisionNeedsAnUntouchedRow(t *testing.T, b *Backend) {
	ctx := testContext(t)
	cases := []struct {
		name  string
		setup func(t *testing.T, r *domain.Resource)
	}{
		{"claimed by a live agent", func(t *testing.T, r *domain.Resource) { mustClaim(t, b, r.ID, "other") }},
		{"args changed since read", func(t *testing.T, r *domain.Resource) {
			if _, err := b.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2}); err != nil {
				t.Fatal(err)
			}
		}},
		{"paused", func(t *testing.T, r *domain.Resource) {
			if _, err := b.SetPaused(ctx, r.ID, true); err != nil {
				t.Fatal(err)
			}
		}},
		{"to be hibernated", func(t *testing.T, r *domain.Resource) {
			if _, err := b.SetHibernate(ctx, r.ID, true); err != nil {
				t.Fatal(err)
			}
		}},
		{"being deleted", func(t *testing.T, r *domain.Resource) {
			if _, err := b.RequestDelete(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		}},
		{"retry scheduled", func(t *testing.T, r *domain.Resource) { setBackoff(t, b, r.ID) }},
		{"pinned to another provisioner", func(t *testing.T, r *domain.Resource) {
			mustExec(t, b, `UPDATE resources SET provisioner = 'elsewhere' WHERE id = $1`, r.ID)
		}},
		{"holding a reservation", func(t *testing.T, r *domain.Resource) {
			lease := mustClaim(t, b, r.ID, "agent")
			if _, err := b.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: r.ID, Owner: r.Owner, Slots: 1, Lease: &lease, HostSlots: slotsEach(hostCapacity)},
				func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) { return "h2", nil }); err != nil {
				t.Fatal(err)
			}
			if err := b.ReleaseResource(ctx, r.ID, lease); err != nil {
				t.Fatal(err)
			}
		}},
		{"owner with a quota", func(t *testing.T, r *domain.Resource) {
			max := int64(100)
			if _, err := b.SetQuota(ctx, domain.QuotaChange{Owner: r.Owner, Provisioner: "pool", Resources: domain.QuotaLimit{Set: true, Max: &max}}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "not-untouched", Owner: "owner-" + strings.ReplaceAll(tc.name, " ", "-"), Args: map[string]any{"slots": 1}})
			tc.setup(t, &r)
			before, err := b.GetResource(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			had, _ := b.ListReservations(ctx, "pool")
			eventsBefore := len(events(t, b, r.ID, 0))
			req, pick := InstantProvision(r, nil)
			if _, err := b.ReserveSlots(ctx, req, pick); !errors.Is(err, domain.ErrNotInstant) {
				t.Fatalf("instant provision: %v, want ErrNotInstant", err)
			}
			// A host that could not be picked is not this path's to report for such a row.
			if _, err := b.ReserveSlots(ctx, req, noRoom); !errors.Is(err, domain.ErrNotInstant) {
				t.Fatalf("instant provision with no room: %v, want ErrNotInstant", err)
			}
			after, err := b.GetResource(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if after.UpdatedAt != before.UpdatedAt || after.Status != before.Status || after.LeaseToken != before.LeaseToken {
				t.Errorf("row changed: %+v, was %+v", after, before)
			}
			if have, _ := b.ListReservations(ctx, "pool"); len(have) != len(had) {
				t.Errorf("reservations %v, were %v", have, had)
			}
			if n := len(events(t, b, r.ID, 0)); n != eventsBefore {
				t.Errorf("%d events, were %d", n, eventsBefore)
			}
		})
	}
}

var errNoRoom = errors.New("no host has room")

// noRoom is a PickHost that finds no host with room.
func noRoom(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
	return "", errNoRoom
}

// An untouched resource no host can be picked for gets the picker's error, not
// ErrNotInstant, and nothing is written.
func testInstantProvisionReportsThePickersError(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "no-room", Owner: "alice", Args: map[string]any{"slots": 1}})
	req, _ := InstantProvision(r, nil)
	if _, err := b.ReserveSlots(ctx, req, noRoom); !errors.Is(err, errNoRoom) || errors.Is(err, domain.ErrNotInstant) {
		t.Fatalf("instant provision with no room: %v, want the picker's error", err)
	}
	after, err := b.GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != domain.StatusPending || after.LeaseToken != r.LeaseToken {
		t.Errorf("row changed: %+v", after)
	}
	if have, _ := b.ListReservations(ctx, "pool"); len(have) != 0 {
		t.Errorf("reservations %v, want none", have)
	}
	if n := len(events(t, b, r.ID, 0)); n != 1 {
		t.Errorf("%d events, want only the creation's", n)
	}
}

// An earlier claim whose lease ran out is fenced by a resource provisioned whole meanwhile:
// none of its writes lands, slots included.
func testInstantProvisionFencesEarlierLeases(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("fenced"))
	c, err := b.ClaimResource(ctx, r.ID, "paused-agent", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the lease runs out on the database's clock
	req, pick := InstantProvision(c.Resource, nil)
	if _, err := b.ReserveSlots(ctx, req, pick); err != nil {
		t.Fatalf("instant provision after the lease ran out: %v", err)
	}
	if _, err := b.RecordProgress(ctx, r.ID, c.Lease, domain.ProgressUpdate{Generation: r.Generation, Status: domain.StatusError,
		Reason: domain.ReasonBrokerError, StatusMessage: "stale", ReleaseLease: true}); !errors.Is(err, domain.ErrLeaseHeld) {
		t.Errorf("record under the earlier lease: %v, want ErrLeaseHeld", err)
	}
	if err := b.ReleaseSlots(ctx, "pool", r.ID, &c.Lease); !errors.Is(err, domain.ErrLeaseHeld) {
		t.Errorf("release slots under the earlier lease: %v, want ErrLeaseHeld", err)
	}
	if rs, _ := b.ListReservations(ctx, "pool"); len(rs) != 1 {
		t.Errorf("reservations = %v, want the one made", rs)
	}
}

// Many agents provisioning the same untouched rows whole at once: each row is provisioned
// once, by one of them, with one reservation, and the others are told to take the usual way.
func testInstantProvisionOnceUnderContention(t *testing.T, b *Backend) {
	ctx := testContext(t)
	stores := []domain.State{b, b.Reopen(t)}
	const rows = 10
	var rs []domain.Resource
	for i := range rows {
		rs = append(rs, mustCreate(t, b, runtime("contended-"+string(rune('a'+i)))))
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		made     = map[string]int{}
		failures []error
	)
	for _, r := range rs {
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, pick := InstantProvision(r, nil)
				_, err := stores[i%len(stores)].ReserveSlots(ctx, req, pick)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					made[r.ID]++
				case !errors.Is(err, domain.ErrNotInstant):
					failures = append(failures, err)
				}
			}()
		}
	}
	wg.Wait()
	for _, err := range failures {
		t.Errorf("instant provision: %v", err)
	}
	for _, r := range rs {
		if made[r.ID] != 1 {
			t.Errorf("resource %s provisioned %d times, want once", r.ID, made[r.ID])
		}
		if n := len(events(t, b, r.ID, 0)); n != 4 {
			t.Errorf("resource %s has %d events, want 4", r.ID, n)
		}
	}
	if got, _ := b.ListReservations(ctx, "pool"); len(got) != rows {
		t.Errorf("%d reservations, want %d", len(got), rows)
	}
}

// Provisions in one transaction racing for one host, from two stores at once, never
// overfill it, though a store may pick the host on a usage the other store changes before
// it commits: each resource is either ready with its reservation or untouched with none.
func testInstantProvisionNeverOverfills(t *testing.T, b *Backend) {
	ctx := testContext(t)
	stores := []domain.State{b, b.Reopen(t)}
	picker := &firstFit{hosts: []string{"h1"}}
	const contenders = 3 * hostCapacity
	var rs []domain.Resource
	for i := range contenders {
		rs = append(rs, mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "racer-" + strings.Repeat("x", i+1), Owner: "alice", Args: map[string]any{"slots": 1}}))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		made = map[string]bool{}
	)
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := InstantProvision(r, nil)
			_, err := stores[i%len(stores)].ReserveSlots(ctx, req, picker.pick)
			if err != nil && !errors.Is(err, domain.ErrNotInstant) && !errors.Is(err, domain.ErrNoCapacity) {
				t.Errorf("instant provision: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			made[r.ID] = err == nil
		}()
	}
	wg.Wait()
	reservations, err := b.ListReservations(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if len(reservations) > hostCapacity {
		t.Errorf("%d reservations of one slot on a host of %d slots", len(reservations), hostCapacity)
	}
	if len(reservations) == 0 {
		t.Errorf("no provision succeeded")
	}
	reserved := map[string]bool{}
	for _, res := range reservations {
		reserved[res.ResourceID] = true
	}
	for _, r := range rs {
		got, err := b.GetResource(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case made[r.ID] && (got.Status != domain.StatusReady || !reserved[r.ID]):
			t.Errorf("resource %s provisioned, but %s with reservation %v", r.ID, got.Status, reserved[r.ID])
		case !made[r.ID] && (got.Status != domain.StatusPending || got.Reason != domain.ReasonCreated || reserved[r.ID]):
			t.Errorf("resource %s refused, but %s/%s with reservation %v", r.ID, got.Status, got.Reason, reserved[r.ID])
		}
	}
}

// An agent that provisions in one transaction may pick hosts on what it last knew of their
// usage; whatever another agent did meanwhile, its provisions neither overfill a host the
// other filled nor are refused room the other freed. Agent a provisions once (and so knows
// h1 holds one slot); agent b then fills h1, and a's next provision goes to h2; b then frees
// every slot, and a's next provision goes to h1 again.
func testInstantProvisionSeesWhatAnotherAgentDid(t *testing.T, b *Backend) {
	ctx := testContext(t)
	other := b.Reopen(t)
	picker := &firstFit{hosts: []string{"h1", "h2"}}
	provision := func(name string) domain.Reservation {
		t.Helper()
		r := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "alice", Args: map[string]any{"slots": 1}})
		var got domain.Resource
		req, _ := InstantProvision(r, &got)
		res, err := b.ReserveSlots(ctx, req, picker.pick)
		if err != nil {
			t.Fatalf("instant provision of %s: %v", name, err)
		}
		if got.Status != domain.StatusReady || got.State["host"] != res.Host {
			t.Errorf("%s recorded %s with state %v, want ready on %s", name, got.Status, got.State, res.Host)
		}
		return res
	}
	if res := provision("first"); res.Host != "h1" {
		t.Fatalf("first provision on %s, want h1", res.Host)
	}
	var filler []string
	for i := range hostCapacity - 1 {
		r := mustCreate(t, b, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: fmt.Sprintf("filler-%d", i), Owner: "bob", Args: map[string]any{"slots": 1}})
		res, err := other.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: r.ID, Owner: "bob", Slots: 1, HostSlots: slotsEach(hostCapacity)}, picker.pick)
		if err != nil {
			t.Fatal(err)
		}
		if res.Host != "h1" {
			t.Fatalf("filler reserved on %s, want h1", res.Host)
		}
		filler = append(filler, r.ID)
	}
	if res := provision("second"); res.Host != "h2" {
		t.Errorf("provision after another agent filled h1 went to %s, want h2", res.Host)
	}
	reservations, err := b.ListReservations(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range reservations {
		if err := other.ReleaseSlots(ctx, "pool", res.ResourceID, nil); err != nil {
			t.Fatal(err)
		}
	}
	if res := provision("third"); res.Host != "h1" {
		t.Errorf("provision after another agent freed every host went to %s, want h1", res.Host)
	}
	if len(picker.overfull) > 0 {
		t.Errorf("the picker was shown hosts beyond capacity: %+v", picker.overfull)
	}
	used := map[string]int{}
	reservations, err = b.ListReservations(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range reservations {
		used[res.Host] += res.Slots
	}
	if used["h1"] != 1 || used["h2"] != 0 || len(filler) != hostCapacity-1 {
		t.Errorf("usage at the end = %v, want only the third's slot, on h1", used)
	}
}

// A one-transaction provision that asks for its row's ready time alone (ReadyAt, no
// Recorded) gets the time the row was recorded ready, as one that asks for both does, and
// the row and its history are the same either way.
func testInstantProvisionReportsItsReadyTime(t *testing.T, b *Backend) {
	ctx := testContext(t)
	for _, whole := range []bool{false, true} {
		r := mustCreate(t, b, runtime(fmt.Sprintf("ready-time-%v", whole)))
		var recorded domain.Resource
		var readyAt time.Time
		req, pick := InstantProvision(r, nil)
		if whole {
			req.Instant.Recorded = &recorded
		}
		req.Instant.ReadyAt = &readyAt
		if _, err := b.ReserveSlots(ctx, req, pick); err != nil {
			t.Fatalf("instant provision (row asked for: %v): %v", whole, err)
		}
		read, err := b.GetResource(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if read.Status != domain.StatusReady || read.ReadyAt == nil || !readyAt.Equal(*read.ReadyAt) {
			t.Errorf("row asked for %v: ReadyAt = %v, row read back ready at %v (status %s)", whole, readyAt, read.ReadyAt, read.Status)
		}
		if whole && (recorded.ReadyAt == nil || !recorded.ReadyAt.Equal(readyAt)) {
			t.Errorf("Recorded ready at %v, ReadyAt %v: want the same", recorded.ReadyAt, readyAt)
		}
		if !whole && recorded.ID != "" {
			t.Errorf("Recorded set to %+v though not asked for", recorded)
		}
		want := strings.Split(strings.TrimSpace(historyGolden), "\n")[:4]
		if got := describe(events(t, b, r.ID, 0)); !slices.Equal(got, want) {
			t.Errorf("row asked for %v: history =\n%s\nwant\n%s", whole, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
