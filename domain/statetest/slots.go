package statetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/domain"
)

const hostCapacity = 10

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
			req := domain.SlotRequest{Provisioner: "static", ResourceID: uuid.NewString(), Owner: "alice", Slots: 1}
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
		return b.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "static", ResourceID: id, Owner: owner, Slots: slots}, pick)
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
	if _, err := b.ReserveSlots(ctx, domain.SlotRequest{ResourceID: uuid.NewString(), Slots: 1}, picker.pick); err == nil {
		t.Fatal("reserved slots of no provisioner")
	}
	if _, err := reserve(uuid.NewString(), "alice", 1, func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		return "", nil
	}); err == nil {
		t.Fatal("reserved slots on no host")
	}

	for range 2 {
		if err := b.ReleaseSlots(ctx, "static", mine); err != nil {
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

func testGetReservation(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	if _, err := b.GetReservation(ctx, "pool", r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("reservation before reserving: %v, want ErrNotFound", err)
	}
	pickA := func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		return "http://a", nil
	}
	if _, err := b.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: r.ID, Owner: "alice", Slots: 2}, pickA); err != nil {
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
