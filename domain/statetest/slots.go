package statetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/domain"
)

const hostCapacity = 10

// slotsEach is a domain.SlotRequest.HostSlots that gives every host n slots.
func slotsEach(n int) func(string) int {
	return func(string) int { return n }
}

// firstFit picks the first of hosts with room for req, counting req's existing reservation
// as freed; it records any usage it is shown beyond capacity.
type firstFit struct {
	hosts []string

	mu       sync.Mutex
	overfull []domain.HostUsage
}

func (f *firstFit) pick(req domain.SlotRequest, existing *domain.Reservation, usage []domain.HostUsage) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := map[string]int{}
	for _, u := range usage {
		if u.UsedSlots > hostCapacity {
			f.overfull = append(f.overfull, u)
		}
		used[u.Host] = u.UsedSlots
	}
	if existing != nil {
		used[existing.Host] -= existing.Slots
	}
	for _, h := range f.hosts {
		if used[h]+req.Slots <= hostCapacity {
			return h, nil
		}
	}
	return "", fmt.Errorf("no host of %v has %d free slots: %w", f.hosts, req.Slots, domain.ErrNoCapacity)
}

// Reservations made at once, by two agents on the same database, never overfill a host.
func testReserveSlotsNeverOverfillsUnderContention(t *testing.T, b *Backend) {
	ctx := testContext(t)
	agents := []domain.SlotStore{b, b.Reopen(t)}
	picker := &firstFit{hosts: []string{"h1", "h2"}}
	const contenders = 40

	watchCtx, stopWatching := context.WithCancel(ctx)
	var watch sync.WaitGroup
	var watchErr error
	var worst int
	watch.Add(1)
	go func() {
		defer watch.Done()
		for watchCtx.Err() == nil {
			var most int
			err := b.QueryRow(watchCtx, `
				SELECT coalesce(max(used), 0) FROM (
				  SELECT sum(slots) AS used FROM slot_reservations WHERE provisioner = 'static' GROUP BY host) per_host`,
			).Scan(&most)
			if err != nil {
				if watchCtx.Err() == nil {
					watchErr = err
				}
				return
			}
			worst = max(worst, most)
		}
	}()

	errs := make([]error, contenders)
	var wg sync.WaitGroup
	for i := range contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := domain.SlotRequest{Provisioner: "static", ResourceID: uuid.NewString(), Owner: "alice", Slots: 1, HostSlots: slotsEach(hostCapacity)}
			_, errs[i] = agents[i%len(agents)].ReserveSlots(ctx, req, picker.pick)
		}()
	}
	wg.Wait()
	stopWatching()
	watch.Wait()

	var reserved, refused int
	for _, err := range errs {
		switch {
		case err == nil:
			reserved++
		case errors.Is(err, domain.ErrNoCapacity):
			refused++
		default:
			t.Errorf("reserve: %v", err)
		}
	}
	if reserved != 2*hostCapacity || refused != contenders-2*hostCapacity {
		t.Fatalf("%d reserved and %d refused, want %d and %d", reserved, refused, 2*hostCapacity, contenders-2*hostCapacity)
	}
	if watchErr != nil {
		t.Fatal(watchErr)
	}
	if worst > hostCapacity || len(picker.overfull) > 0 {
		t.Fatalf("a host held %d slots (pick saw %v), capacity is %d", worst, picker.overfull, hostCapacity)
	}
	rs, err := b.ListReservations(ctx, "static")
	if err != nil || len(rs) != 2*hostCapacity {
		t.Fatalf("list = %d reservations, %v; want %d", len(rs), err, 2*hostCapacity)
	}
	for i := 1; i < len(rs); i++ {
		if rs[i-1].Host > rs[i].Host || rs[i-1].Host == rs[i].Host && rs[i-1].ResourceID >= rs[i].ResourceID {
			t.Fatalf("reservations not ordered by host, resource: %+v", rs)
		}
	}
}

func testReserveSlotsResizesAndReportsUsage(t *testing.T, b *Backend) {
	ctx := testContext(t)
	picker := &firstFit{hosts: []string{"h1", "h2"}}
	mine, neighbour, stranger := uuid.NewString(), uuid.NewString(), uuid.NewString()
	reserve := func(id, owner string, slots int, pick domain.PickHost) (domain.Reservation, error) {
		return b.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "static", ResourceID: id, Owner: owner, Slots: slots, HostSlots: slotsEach(hostCapacity)}, pick)
	}
	if _, err := reserve(neighbour, "alice", 4, picker.pick); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve(stranger, "bob", 1, picker.pick); err != nil {
		t.Fatal(err)
	}
	first, err := reserve(mine, "alice", 3, picker.pick)
	if err != nil || first.Host != "h1" || first.Slots != 3 || first.Owner != "alice" || first.ResourceID != mine || first.Provisioner != "static" {
		t.Fatalf("reserve 3 = %+v, %v; want h1", first, err)
	}

	unchanged, err := reserve(mine, "alice", 3, func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		t.Error("pick called for an unchanged reservation")
		return "", errors.New("unexpected pick")
	})
	if err != nil || unchanged != first {
		t.Fatalf("reserve the same slots = %+v, %v; want %+v", unchanged, err, first)
	}

	var seen []domain.HostUsage
	var seenExisting *domain.Reservation
	grown, err := reserve(mine, "alice", 6, func(req domain.SlotRequest, existing *domain.Reservation, usage []domain.HostUsage) (string, error) {
		seen, seenExisting = usage, existing
		return picker.pick(req, existing, usage)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.HostUsage{{Host: "h1", UsedSlots: 8, OwnerResources: 1}}
	if len(seen) != 1 || seen[0] != want[0] {
		t.Fatalf("pick saw usage %+v, want %+v (own reservation counted, own resource not)", seen, want)
	}
	if seenExisting == nil || *seenExisting != first {
		t.Fatalf("pick saw existing %+v, want %+v", seenExisting, first)
	}
	if grown.Host != "h2" || grown.Slots != 6 {
		t.Fatalf("grown = %+v, want 6 slots moved to h2", grown)
	}

	if _, err := reserve(mine, "alice", 11, picker.pick); !errors.Is(err, domain.ErrNoCapacity) {
		t.Fatalf("reserve beyond any host: err = %v, want ErrNoCapacity", err)
	}
	rs, err := b.ListReservations(ctx, "static")
	if err != nil || len(rs) != 3 {
		t.Fatalf("list = %+v, %v", rs, err)
	}
	if _, err := reserve(uuid.NewString(), "alice", 0, picker.pick); err == nil {
		t.Fatal("reserved zero slots")
	}
	if _, err := b.ReserveSlots(ctx, domain.SlotRequest{ResourceID: uuid.NewString(), Slots: 1, HostSlots: slotsEach(hostCapacity)}, picker.pick); err == nil {
		t.Fatal("reserved slots of no provisioner")
	}
	var fieldErr *domain.FieldError
	if _, err := b.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "static", ResourceID: uuid.NewString(), Owner: "alice", Slots: 1}, picker.pick); !errors.As(err, &fieldErr) || fieldErr.Field != "hostSlots" {
		t.Fatalf("reserve without the hosts' slots: err = %v, want a FieldError naming hostSlots", err)
	}
	if _, err := reserve(uuid.NewString(), "alice", 1, func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		return "", nil
	}); err == nil {
		t.Fatal("reserved slots on no host")
	}

	for range 2 {
		if err := b.ReleaseSlots(ctx, "static", mine, nil); err != nil {
			t.Fatalf("release: %v", err)
		}
	}
	rs, err = b.ListReservations(ctx, "static")
	if err != nil || len(rs) != 2 || rs[0].ResourceID == mine || rs[1].ResourceID == mine {
		t.Fatalf("after release: %+v, %v", rs, err)
	}
	other, err := b.ListReservations(ctx, "elsewhere")
	if err != nil || len(other) != 0 {
		t.Fatalf("another provisioner's reservations = %+v, %v; want none", other, err)
	}
}

// errProbe is the pick error of probeUsage.
var errProbe = errors.New("usage probe: reserve nothing")

// probeUsage returns the usage ReserveSlots shows pick for a new resource of owner, reserving
// nothing.
func probeUsage(t *testing.T, st domain.SlotStore, provisioner, owner string) []domain.HostUsage {
	t.Helper()
	var seen []domain.HostUsage
	req := domain.SlotRequest{Provisioner: provisioner, ResourceID: uuid.NewString(), Owner: owner, Slots: 1, HostSlots: slotsEach(hostCapacity)}
	_, err := st.ReserveSlots(testContext(t), req, func(_ domain.SlotRequest, _ *domain.Reservation, usage []domain.HostUsage) (string, error) {
		seen = usage
		return "", errProbe
	})
	if !errors.Is(err, errProbe) {
		t.Fatalf("usage probe: err = %v, want the probe's own", err)
	}
	return seen
}

// usageOfReservations adds up the provisioner's reservations as ReserveSlots must show them
// to pick for a new resource of owner: hosts with none absent, ordered by host.
func usageOfReservations(t *testing.T, st domain.SlotStore, provisioner, owner string) []domain.HostUsage {
	t.Helper()
	rs, err := st.ListReservations(testContext(t), provisioner)
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.HostUsage
	for _, r := range rs { // ordered by host
		if len(out) == 0 || out[len(out)-1].Host != r.Host {
			out = append(out, domain.HostUsage{Host: r.Host})
		}
		u := &out[len(out)-1]
		u.UsedSlots += r.Slots
		if r.Owner == owner {
			u.OwnerResources++
		}
	}
	return out
}

// expectUsage checks that pick is shown what the reservations add up to, for each owner.
func expectUsage(t *testing.T, st domain.SlotStore, what, provisioner string, owners ...string) {
	t.Helper()
	for _, owner := range owners {
		got, want := probeUsage(t, st, provisioner, owner), usageOfReservations(t, st, provisioner, owner)
		if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
			t.Fatalf("%s: pick saw %+v for %s of %s; the reservations add up to %+v", what, got, owner, provisioner, want)
		}
	}
}

// The usage pick is shown follows every change of the reservations: reserving, resizing,
// moving and releasing through the store, and inserts, updates and deletes made with plain
// SQL, including a change of owner or provisioner.
func testSlotUsageFollowsEveryWriter(t *testing.T, b *Backend) {
	ctx := testContext(t)
	owners := []string{"alice", "bob", "carol", "nobody"}
	on := func(host string) domain.PickHost {
		return func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) { return host, nil }
	}
	reserve := func(id, owner string, slots int, pick domain.PickHost) {
		t.Helper()
		req := domain.SlotRequest{Provisioner: "pool", ResourceID: id, Owner: owner, Slots: slots, HostSlots: slotsEach(hostCapacity)}
		if _, err := b.ReserveSlots(ctx, req, pick); err != nil {
			t.Fatalf("reserve %d slots for %s: %v", slots, owner, err)
		}
	}
	if got := probeUsage(t, b, "pool", "alice"); len(got) != 0 {
		t.Fatalf("usage before any reservation: %+v, want none", got)
	}
	a, bb, c, d := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	reserve(a, "alice", 2, on("h1"))
	reserve(bb, "bob", 3, on("h2"))
	reserve(c, "alice", 1, on("h2"))
	expectUsage(t, b, "after reserving", "pool", owners...)
	if got := probeUsage(t, b, "pool", "alice"); len(got) != 2 || got[0] != (domain.HostUsage{Host: "h1", UsedSlots: 2, OwnerResources: 1}) ||
		got[1] != (domain.HostUsage{Host: "h2", UsedSlots: 4, OwnerResources: 1}) {
		t.Fatalf("alice's view after reserving: %+v", got)
	}

	reserve(a, "alice", 4, on("h1")) // grown in place
	reserve(c, "alice", 2, on("h1")) // grown and moved
	expectUsage(t, b, "after resizing and moving", "pool", owners...)

	mustExec(t, b, `INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots) VALUES ('pool', $1, 'carol', 'h3', 5)`, d)
	expectUsage(t, b, "after an SQL insert", "pool", owners...)
	mustExec(t, b, `UPDATE slot_reservations SET host = 'h3', slots = 1 WHERE provisioner = 'pool' AND resource_id = $1`, bb)
	mustExec(t, b, `UPDATE slot_reservations SET owner = 'carol' WHERE provisioner = 'pool' AND resource_id = $1`, c)
	expectUsage(t, b, "after SQL updates of host, slots and owner", "pool", owners...)
	mustExec(t, b, `UPDATE slot_reservations SET provisioner = 'other' WHERE provisioner = 'pool' AND resource_id = $1`, d)
	expectUsage(t, b, "after an SQL change of provisioner", "pool", owners...)
	expectUsage(t, b, "after an SQL change of provisioner", "other", owners...)

	if err := b.ReleaseSlots(ctx, "pool", a, nil); err != nil {
		t.Fatal(err)
	}
	expectUsage(t, b, "after a release", "pool", owners...)
	mustExec(t, b, `DELETE FROM slot_reservations WHERE resource_id IN ($1, $2, $3)`, bb, c, d)
	for _, p := range []string{"pool", "other"} {
		if got := probeUsage(t, b, p, "alice"); len(got) != 0 {
			t.Fatalf("usage of %s once every reservation is gone: %+v, want none", p, got)
		}
	}
}

// Reservations, resizes and releases at once, by two agents on the same database, never
// overfill a host, and leave the usage pick is shown equal to what the reservations add up to.
func testSlotUsageStaysRightUnderContention(t *testing.T, b *Backend) {
	ctx := testContext(t)
	agents := []domain.SlotStore{b, b.Reopen(t)}
	picker := &firstFit{hosts: []string{"h1", "h2", "h3"}}
	const workers, rounds = 12, 4

	errs := make(chan error, workers*rounds*3)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := agents[i%len(agents)]
			owner := fmt.Sprintf("owner-%d", i%3)
			for round := range rounds {
				id := uuid.NewString()
				slots := 1 + (i+round)%3
				req := domain.SlotRequest{Provisioner: "static", ResourceID: id, Owner: owner, Slots: slots, HostSlots: slotsEach(hostCapacity)}
				if _, err := st.ReserveSlots(ctx, req, picker.pick); err != nil {
					if !errors.Is(err, domain.ErrNoCapacity) {
						errs <- err
					}
					continue
				}
				req.Slots = 4 - slots
				if _, err := st.ReserveSlots(ctx, req, picker.pick); err != nil && !errors.Is(err, domain.ErrNoCapacity) {
					errs <- err
				}
				if round%2 == 1 {
					if err := st.ReleaseSlots(ctx, "static", id, nil); err != nil {
						errs <- err
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("reserve or release: %v", err)
	}
	if len(picker.overfull) > 0 {
		t.Fatalf("pick saw hosts beyond capacity %d: %v", hostCapacity, picker.overfull)
	}
	for _, u := range usageOfReservations(t, b, "static", "") {
		if u.UsedSlots > hostCapacity {
			t.Fatalf("host %s holds %d slots, capacity is %d", u.Host, u.UsedSlots, hostCapacity)
		}
	}
	expectUsage(t, b, "after the contention", "static", "owner-0", "owner-1", "owner-2")
}

func testGetReservation(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	if _, err := b.GetReservation(ctx, "pool", r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("reservation before reserving: %v, want ErrNotFound", err)
	}
	pickA := func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		return "http://a", nil
	}
	if _, err := b.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: r.ID, Owner: "alice", Slots: 2, HostSlots: slotsEach(hostCapacity)}, pickA); err != nil {
		t.Fatal(err)
	}
	got, err := b.GetReservation(ctx, "pool", r.ID)
	want := domain.Reservation{Provisioner: "pool", ResourceID: r.ID, Owner: "alice", Host: "http://a", Slots: 2}
	if err != nil || got != want {
		t.Errorf("reservation = %+v, %v; want %+v", got, err, want)
	}
	if _, err := b.GetReservation(ctx, "other", r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("reservation of another provisioner: %v, want ErrNotFound", err)
	}
}

// reservedByHost adds up the provisioner's reservations as ReservedByHost must return them.
func reservedByHost(t *testing.T, st domain.SlotStore, provisioner string) []domain.HostReservations {
	t.Helper()
	rs, err := st.ListReservations(testContext(t), provisioner)
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.HostReservations
	for _, r := range rs { // ordered by host
		if len(out) == 0 || out[len(out)-1].Host != r.Host {
			out = append(out, domain.HostReservations{Host: r.Host})
		}
		out[len(out)-1].Slots += int64(r.Slots)
		out[len(out)-1].Resources++
	}
	return out
}

// expectReservedByHost checks that ReservedByHost returns what the reservations add up to.
func expectReservedByHost(t *testing.T, b *Backend, what, provisioner string) {
	t.Helper()
	got, err := b.ReservedByHost(testContext(t), provisioner)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if want := reservedByHost(t, b, provisioner); len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
		t.Fatalf("%s: ReservedByHost(%s) = %+v; the reservations add up to %+v", what, provisioner, got, want)
	}
}

// ReservedByHost follows reservations made, resized, moved and released through the store and
// with plain SQL, per host and per provisioner, whatever the owners.
func testReservedByHost(t *testing.T, b *Backend) {
	ctx := testContext(t)
	expectReservedByHost(t, b, "before any reservation", "pool")
	reserve := func(id, owner, host string, slots int) {
		t.Helper()
		req := domain.SlotRequest{Provisioner: "pool", ResourceID: id, Owner: owner, Slots: slots, HostSlots: slotsEach(hostCapacity)}
		if _, err := b.ReserveSlots(ctx, req, func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
			return host, nil
		}); err != nil {
			t.Fatalf("reserve %d slots on %s for %s: %v", slots, host, owner, err)
		}
	}
	a, bb, c, d := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	reserve(a, "alice", "h1", 2)
	reserve(bb, "bob", "h1", 3)
	reserve(c, "alice", "h2", 1)
	got, err := b.ReservedByHost(ctx, "pool")
	want := []domain.HostReservations{{Host: "h1", Slots: 5, Resources: 2}, {Host: "h2", Slots: 1, Resources: 1}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ReservedByHost after reserving = %+v, %v; want %+v", got, err, want)
	}

	reserve(a, "alice", "h1", 4) // grown in place
	reserve(bb, "bob", "h2", 1)  // shrunk and moved
	expectReservedByHost(t, b, "after resizing and moving", "pool")
	mustExec(t, b, `INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots) VALUES ('pool', $1, 'carol', 'h3', 5)`, d)
	mustExec(t, b, `UPDATE slot_reservations SET owner = 'carol' WHERE provisioner = 'pool' AND resource_id = $1`, c)
	expectReservedByHost(t, b, "after SQL writes", "pool")
	mustExec(t, b, `UPDATE slot_reservations SET provisioner = 'other' WHERE provisioner = 'pool' AND resource_id = $1`, d)
	expectReservedByHost(t, b, "after an SQL change of provisioner", "pool")
	got, err = b.ReservedByHost(ctx, "other")
	if want := []domain.HostReservations{{Host: "h3", Slots: 5, Resources: 1}}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("ReservedByHost of the other provisioner = %+v, %v; want %+v", got, err, want)
	}

	for _, id := range []string{a, bb, c} {
		if err := b.ReleaseSlots(ctx, "pool", id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := b.ReservedByHost(ctx, "pool"); err != nil || len(got) != 0 {
		t.Fatalf("ReservedByHost once every reservation is released = %+v, %v; want none", got, err)
	}
}

// OrphanedReservations returns the reservations whose resource row is gone, not those of live
// resources nor of resources being deleted, of the provisioner asked about, by resource, up to
// the limit and from after the id given.
func testOrphanedReservations(t *testing.T, b *Backend) {
	ctx := testContext(t)
	live := mustCreate(t, b, runtime("live"))
	deleting := mustCreate(t, b, runtime("deleting"))
	gone := mustCreate(t, b, runtime("gone"))
	reserve := func(provisioner, id string) domain.Reservation {
		t.Helper()
		req := domain.SlotRequest{Provisioner: provisioner, ResourceID: id, Owner: "alice", Slots: 1, HostSlots: slotsEach(hostCapacity)}
		res, err := b.ReserveSlots(ctx, req, func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
			return "h1", nil
		})
		if err != nil {
			t.Fatalf("reserve for %s: %v", id, err)
		}
		return res
	}
	if got, err := b.OrphanedReservations(ctx, "pool", "", 10); err != nil || len(got) != 0 {
		t.Fatalf("orphans before any reservation = %+v, %v; want none", got, err)
	}
	reserve("pool", live.ID)
	reserve("pool", deleting.ID)
	for _, id := range []string{deleting.ID, gone.ID} {
		if _, err := b.RequestDelete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.FinalizeDelete(ctx, gone.ID, mustClaim(t, b, gone.ID, "agent-a")); err != nil {
		t.Fatal(err)
	}
	// Reservations made without a lease after the rows were gone, as a check racing a delete
	// makes them.
	orphans := []domain.Reservation{reserve("pool", gone.ID), reserve("pool", missingID), reserve("pool", uuid.NewString())}
	reserve("other", uuid.NewString())
	slices.SortFunc(orphans, func(x, y domain.Reservation) int { return strings.Compare(x.ResourceID, y.ResourceID) })

	got, err := b.OrphanedReservations(ctx, "pool", "", 10)
	if err != nil || !slices.Equal(got, orphans) {
		t.Fatalf("orphans = %+v, %v; want %+v (a row being deleted still exists)", got, err, orphans)
	}
	got, err = b.OrphanedReservations(ctx, "pool", "", 2)
	if err != nil || !slices.Equal(got, orphans[:2]) {
		t.Fatalf("orphans up to 2 = %+v, %v; want %+v", got, err, orphans[:2])
	}
	got, err = b.OrphanedReservations(ctx, "pool", strings.ToUpper(orphans[1].ResourceID), 2)
	if err != nil || !slices.Equal(got, orphans[2:]) {
		t.Fatalf("orphans after the second = %+v, %v; want %+v", got, err, orphans[2:])
	}
	var field *domain.FieldError
	if _, err := b.OrphanedReservations(ctx, "pool", "", 0); !errors.As(err, &field) || field.Field != "limit" {
		t.Fatalf("orphans up to 0: err = %v; want a FieldError naming limit", err)
	}
	if _, err := b.OrphanedReservations(ctx, "pool", "not-a-uuid", 2); !errors.As(err, &field) || field.Field != "after" {
		t.Fatalf("orphans after a bad id: err = %v; want a FieldError naming after", err)
	}
}
