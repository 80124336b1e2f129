package static

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// fakeRows answers resource lookups from a fixed set of rows.
type fakeRows map[string]domain.Status

func (f fakeRows) GetResource(_ context.Context, id string) (domain.Resource, error) {
	status, ok := f[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	return domain.Resource{ID: id, Status: status}, nil
}

func newEnvironWithRows(t *testing.T, slots domain.SlotStore, rows fakeRows) environ.Environ {
	t.Helper()
	env, err := NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(twoHosts), environ.Deps{Slots: slots, Resources: rows})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestCheckReleasesReservationsOfResourcesThatAreGone(t *testing.T) {
	slots := newFakeSlots()
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "live", Host: hostA, Slots: 1})
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "gone", Host: hostB, Slots: 2})
	env := newEnvironWithRows(t, slots, fakeRows{"live": domain.StatusReady})

	if err := env.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	left, _ := slots.ListReservations(context.Background(), "pool")
	if len(left) != 1 || left[0].ResourceID != "live" {
		t.Fatalf("reservations after the sweep = %+v, want only the live resource's", left)
	}
}

// batchRows answers the orphan sweep's lookup in one call and fails any single lookup.
type batchRows struct {
	fakeRows
	t     *testing.T
	calls int
}

func (b *batchRows) GetResource(_ context.Context, id string) (domain.Resource, error) {
	b.t.Errorf("the sweep looked up resource %s on its own instead of in one batch", id)
	return domain.Resource{}, errors.New("unexpected single lookup")
}

func (b *batchRows) MissingResources(_ context.Context, ids []string) ([]string, error) {
	b.calls++
	var out []string
	for _, id := range ids {
		if _, ok := b.fakeRows[id]; !ok {
			out = append(out, id)
		}
	}
	return out, nil
}

func TestCheckSweepsOrphansInOneLookup(t *testing.T) {
	slots := newFakeSlots()
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "live", Host: hostA, Slots: 1})
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "deleting", Host: hostA, Slots: 1})
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "gone", Host: hostB, Slots: 2})
	rows := &batchRows{fakeRows: fakeRows{"live": domain.StatusReady, "deleting": domain.StatusDeleting}, t: t}
	env, err := NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(twoHosts), environ.Deps{Slots: slots, Resources: rows})
	if err != nil {
		t.Fatal(err)
	}

	if err := env.Check(context.Background()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if rows.calls != 1 {
		t.Errorf("the sweep made %d batched lookups, want 1", rows.calls)
	}
	left, _ := slots.ListReservations(context.Background(), "pool")
	var ids []string
	for _, res := range left {
		ids = append(ids, res.ResourceID)
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "deleting,live" {
		t.Fatalf("reservations after the sweep are those of %v, want the live and the deleting resource's", ids)
	}
}

func TestCheckResourceDoesNotReserveForADeletedResource(t *testing.T) {
	for _, rows := range []fakeRows{{}, {"r1": domain.StatusDeleting}} {
		slots := newFakeSlots()
		env := newEnvironWithRows(t, slots, rows)
		_, err := env.CheckResource(context.Background(), runtimeRes("r1"), withSlots("o", 1))
		if err == nil || !(strings.Contains(err.Error(), "deleted") || errors.Is(err, domain.ErrNotFound)) {
			t.Errorf("rows %v: CheckResource = %v, want a refusal to reserve again", rows, err)
		}
		if left, _ := slots.ListReservations(context.Background(), "pool"); len(left) != 0 {
			t.Errorf("rows %v: a check reserved %+v for a resource that is gone", rows, left)
		}
	}
}

func TestCheckResourceRepairsALiveResource(t *testing.T) {
	slots := newFakeSlots()
	env := newEnvironWithRows(t, slots, fakeRows{"r1": domain.StatusReady})
	got, err := env.CheckResource(context.Background(), runtimeRes("r1"), withSlots("o", 1))
	if err != nil {
		t.Fatalf("CheckResource: %v", err)
	}
	if len(got.Repairs) != 1 {
		t.Fatalf("repairs = %v, want the reservation's repair", got.Repairs)
	}
}

// rowOf answers every lookup with one row.
type rowOf domain.Resource

func (r rowOf) GetResource(_ context.Context, id string) (domain.Resource, error) {
	row := domain.Resource(r)
	row.ID = id
	return row, nil
}

// A check that finds a reservation missing of a resource paused or hibernating meanwhile
// reserves nothing, and says the row moved on (domain.ErrStale): the check records nothing.
func TestCheckResourceDoesNotReserveForAPausedOrHibernatingResource(t *testing.T) {
	for _, row := range []domain.Resource{
		{Status: domain.StatusReady, Paused: true},
		{Status: domain.StatusReady, Hibernate: true},
		{Status: domain.StatusHibernating, Hibernate: true},
	} {
		slots := newFakeSlots()
		env, err := NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(twoHosts), environ.Deps{Slots: slots, Resources: rowOf(row)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = env.CheckResource(context.Background(), runtimeRes("r1"), withSlots("o", 1))
		if !errors.Is(err, domain.ErrStale) {
			t.Errorf("row %+v: CheckResource = %v, want an error wrapping ErrStale", row, err)
		}
		if left, _ := slots.ListReservations(context.Background(), "pool"); len(left) != 0 {
			t.Errorf("row %+v: a check reserved %+v", row, left)
		}
	}
}
