package static

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// batchSlots is a slot store with the single and the batched reservation lookups, counting
// both.
type batchSlots struct {
	*fakeSlots
	mu               sync.Mutex
	batches, singles int
}

func (b *batchSlots) GetReservations(_ context.Context, provisioner string, ids []string) ([]domain.Reservation, error) {
	b.mu.Lock()
	b.batches++
	b.mu.Unlock()
	b.fakeSlots.mu.Lock()
	defer b.fakeSlots.mu.Unlock()
	var out []domain.Reservation
	for _, id := range ids {
		if r, ok := b.res[[2]string{provisioner, id}]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

func (b *batchSlots) GetReservation(_ context.Context, provisioner, id string) (domain.Reservation, error) {
	b.mu.Lock()
	b.singles++
	b.mu.Unlock()
	b.fakeSlots.mu.Lock()
	defer b.fakeSlots.mu.Unlock()
	if r, ok := b.res[[2]string{provisioner, id}]; ok {
		return r, nil
	}
	return domain.Reservation{}, domain.ErrNotFound
}

func (b *batchSlots) counts() (batches, singles int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batches, b.singles
}

func newPreparingEnviron(t *testing.T) (*staticEnviron, *batchSlots, *testclock.Clock) {
	t.Helper()
	slots := &batchSlots{fakeSlots: newFakeSlots()}
	clk := testclock.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	env, err := NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(twoHosts), environ.Deps{
		Slots: slots, Resources: fakeRows{"r1": domain.StatusReady, "r2": domain.StatusReady, "r3": domain.StatusReady}, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	return env.(*staticEnviron), slots, clk
}

func prepare(t *testing.T, env *staticEnviron, ids ...string) environ.PreparedChecks {
	t.Helper()
	checks, err := env.PrepareChecks(context.Background(), ids)
	if err != nil {
		t.Fatalf("PrepareChecks: %v", err)
	}
	return checks
}

func checkHost(t *testing.T, checks environ.PreparedChecks, id string) (string, []string) {
	t.Helper()
	got, err := checks.CheckResource(context.Background(), runtimeRes(id), withSlots("o", 1))
	if err != nil {
		t.Fatalf("check %s: %v", id, err)
	}
	return got.State["host"].(string), got.Repairs
}

func TestPreparedChecksReadThePageOnce(t *testing.T) {
	env, slots, _ := newPreparingEnviron(t)
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "r1", Host: hostA, Slots: 1})
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "r2", Host: hostB, Slots: 1})
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "r3", Host: hostB, Slots: 1})
	checks := prepare(t, env, "r1", "r2")

	if host, repairs := checkHost(t, checks, "r1"); host != hostA || len(repairs) != 0 {
		t.Errorf("r1 checked on %s with repairs %v, want on %s with none", host, repairs, hostA)
	}
	if host, _ := checkHost(t, checks, "r2"); host != hostB {
		t.Errorf("r2 checked on %s, want %s", host, hostB)
	}
	if batches, singles := slots.counts(); batches != 1 || singles != 0 {
		t.Fatalf("a page of two checks read %d batches and %d single reservations, want one batch", batches, singles)
	}
	if host, _ := checkHost(t, checks, "r3"); host != hostB {
		t.Errorf("r3 (not in the page) checked on %s, want %s", host, hostB)
	}
	if _, singles := slots.counts(); singles != 1 {
		t.Fatalf("a resource outside the page was checked with %d single reads, want its own", singles)
	}
}

func TestPreparedChecksReadAMissingReservationAgainBeforeRepairing(t *testing.T) {
	env, slots, _ := newPreparingEnviron(t)
	checks := prepare(t, env, "r1", "r2")
	// Meanwhile another check reserved r1 again; r2 still has none.
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "r1", Host: hostB, Slots: 1})

	if host, repairs := checkHost(t, checks, "r1"); host != hostB || len(repairs) != 0 {
		t.Errorf("r1 checked on %s with repairs %v, want on %s (its reservation now) with none", host, repairs, hostB)
	}
	if _, singles := slots.counts(); singles != 1 || slots.picks != 0 {
		t.Fatalf("r1's check read %d single reservations and placed %d, want it read again and not placed", singles, slots.picks)
	}
	_, repairs := checkHost(t, checks, "r2")
	if len(repairs) != 1 || !strings.Contains(repairs[0], "slot reservation was missing") {
		t.Errorf("r2's repairs = %v, want its missing reservation made again", repairs)
	}
}

func TestPreparedChecksAnswerForALimitedTime(t *testing.T) {
	env, slots, clk := newPreparingEnviron(t)
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "r1", Host: hostA, Slots: 1})
	checks := prepare(t, env, "r1")
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "r1", Host: hostB, Slots: 1})

	clk.Advance(preparedFor - time.Nanosecond)
	if host, _ := checkHost(t, checks, "r1"); host != hostA {
		t.Errorf("checked on %s, want %s as read for the page", host, hostA)
	}
	clk.Advance(time.Nanosecond)
	if host, _ := checkHost(t, checks, "r1"); host != hostB {
		t.Errorf("checked %s after the page's read, on %s; want %s, read again", preparedFor, host, hostB)
	}
}

func TestPrepareChecksWithoutABatchedLookupChecksOneByOne(t *testing.T) {
	slots := newFakeSlots()
	slots.put(domain.Reservation{Provisioner: "pool", ResourceID: "r1", Host: hostA, Slots: 1})
	env := newTestEnviron(t, "pool", twoHosts, slots).(*staticEnviron)
	if host, _ := checkHost(t, prepare(t, env, "r1"), "r1"); host != hostA {
		t.Errorf("checked on %s, want %s", host, hostA)
	}
}
