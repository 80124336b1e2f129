package statetest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/domain"
)

func testMissingResources(t *testing.T, b *Backend) {
	ctx := testContext(t)
	live := mustCreate(t, b, runtime("live"))
	deleting := mustCreate(t, b, runtime("deleting"))
	gone := mustCreate(t, b, runtime("gone"))
	for _, id := range []string{deleting.ID, gone.ID} {
		if _, err := b.RequestDelete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.FinalizeDelete(ctx, gone.ID, mustClaim(t, b, gone.ID, "agent-a")); err != nil {
		t.Fatal(err)
	}

	if got, err := b.MissingResources(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("missing among no ids = %v, %v; want none", got, err)
	}
	ids := []string{missingID, live.ID, "not-a-uuid", deleting.ID, strings.ToUpper(live.ID), gone.ID, missingID}
	want := []string{missingID, "not-a-uuid", gone.ID, missingID}
	got, err := b.MissingResources(ctx, ids)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("missing among %v = %v, %v; want %v (a row being deleted still exists)", ids, got, err, want)
	}

	// More ids than one statement takes: each is still answered for, in order.
	var many, wantMany []string
	for range 100050 {
		id := uuid.NewString()
		many = append(many, id)
		wantMany = append(wantMany, id)
	}
	many = slices.Insert(many, 100000, live.ID)
	many = append(many, gone.ID, deleting.ID)
	wantMany = append(wantMany, gone.ID)
	got, err = b.MissingResources(ctx, many)
	if err != nil || !slices.Equal(got, wantMany) {
		t.Fatalf("missing among %d ids: %d ids, %v; want the %d that name no row, in order", len(many), len(got), err, len(wantMany))
	}
}

func testGetReservations(t *testing.T, b *Backend) {
	ctx := testContext(t)
	pick := func(host string) domain.PickHost {
		return func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) { return host, nil }
	}
	var ids []string
	want := map[string]domain.Reservation{}
	for i, p := range []string{"pool", "other", "pool", ""} {
		r := mustCreate(t, b, runtime(fmt.Sprintf("web-%d", i)))
		ids = append(ids, r.ID)
		if p == "" {
			continue
		}
		res, err := b.ReserveSlots(ctx, domain.SlotRequest{Provisioner: p, ResourceID: r.ID, Owner: "alice", Slots: i + 1, HostSlots: slotsEach(hostCapacity)}, pick("http://h"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if p == "pool" {
			want[r.ID] = res
		}
	}
	inOrder := func(ids ...string) []domain.Reservation {
		slices.Sort(ids)
		out := make([]domain.Reservation, len(ids))
		for i, id := range ids {
			out[i] = want[id]
		}
		return out
	}

	if got, err := b.GetReservations(ctx, "pool", nil); err != nil || len(got) != 0 {
		t.Fatalf("reservations of no resources = %v, %v; want none", got, err)
	}
	asked := []string{ids[2], "not-a-uuid", ids[1], missingID, strings.ToUpper(ids[0]), ids[3]}
	got, err := b.GetReservations(ctx, "pool", asked)
	if wantHere := inOrder(ids[0], ids[2]); err != nil || !slices.Equal(got, wantHere) {
		t.Fatalf("reservations of pool for %v = %+v, %v; want %+v (ordered by resource, other provisioners' left out)", asked, got, err, wantHere)
	}

	// More ids than one statement takes: every reservation is still found, in order.
	var many []string
	for range 10050 {
		many = append(many, uuid.NewString())
	}
	many = slices.Insert(many, 5000, ids[2])
	many = append(many, ids[0])
	got, err = b.GetReservations(ctx, "pool", many)
	if wantHere := inOrder(ids[0], ids[2]); err != nil || !slices.Equal(got, wantHere) {
		t.Fatalf("reservations of pool among %d ids = %+v, %v; want %+v", len(many), got, err, wantHere)
	}
}
