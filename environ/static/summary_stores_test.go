package static_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/domain/sqlite"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
	"github.com/berth-dev/berth/internal/pgtest"
)

// openPostgres opens PostgreSQL's store on a fresh, migrated database, closed when t ends.
func openPostgres(t *testing.T, ctx context.Context) *postgres.State {
	t.Helper()
	st, err := postgres.Open(ctx, pgtest.New(t), postgres.PoolConfig{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st
}

// realStores opens each real store on a fresh, migrated database, closed when t ends.
var realStores = map[string]func(t *testing.T, ctx context.Context) domain.State{
	"postgres": func(t *testing.T, ctx context.Context) domain.State { return openPostgres(t, ctx) },
	"sqlite": func(t *testing.T, ctx context.Context) domain.State {
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "berth.db"))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(st.Close)
		if err := st.Migrate(ctx); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		return st
	},
}

// onRealStores runs test on each real store, with a context of a minute and the static
// pool of spec on the store; deps gives what of the store the environ is handed.
func onRealStores(t *testing.T, spec string, deps func(domain.State) environ.Deps,
	test func(t *testing.T, ctx context.Context, st domain.State, env environ.Environ)) {
	for name, open := range realStores {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st := open(t, ctx)
			env, err := static.NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(spec), deps(st))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			test(t, ctx, st, env)
		})
	}
}

// unlisted is a real store that fails the test when the pool's reservations are listed whole.
type unlisted struct {
	domain.State
	t *testing.T
}

func (s unlisted) ListReservations(ctx context.Context, provisioner string) ([]domain.Reservation, error) {
	s.t.Errorf("every reservation of %s was listed", provisioner)
	return s.State.ListReservations(ctx, provisioner)
}

func (s unlisted) MissingResources(ctx context.Context, ids []string) ([]string, error) {
	s.t.Errorf("%d resource ids were looked up for the orphan sweep", len(ids))
	return s.State.MissingResources(ctx, ids)
}

// TestCheckAndCapacityReadTheStoresSummary: on a real store, Check and Capacity never list the
// pool's reservations nor hand every resource id to the orphan sweep, whose memory would grow
// with the pool, and still release every orphan (more than the sweep reads at a time), keep
// the reservations of live resources and of those being deleted, and report what each host
// holds.
func TestCheckAndCapacityReadTheStoresSummary(t *testing.T) {
	for name, open := range realStores {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st := open(t, ctx)
			// Host c was removed from the spec and b's slots were cut to 1.
			const spec = `{"runtimes": [{"host": "http://a:9091", "slots": 10}, {"host": "http://b:9091", "slots": 1}]}`
			env, err := static.NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(spec), environ.Deps{Slots: unlisted{st, t}, Resources: unlisted{st, t}})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			reserve := func(id, host string, slots int) {
				t.Helper()
				req := domain.SlotRequest{Provisioner: "pool", ResourceID: id, Owner: "alice", Slots: slots, HostSlots: func(string) int { return math.MaxInt32 }}
				if _, err := st.ReserveSlots(ctx, req, func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
					return host, nil
				}); err != nil {
					t.Fatalf("reserve for %s on %s: %v", id, host, err)
				}
			}
			create := func(name string) string {
				t.Helper()
				r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "alice", Args: map[string]any{"slots": 1}})
				if err != nil {
					t.Fatalf("create %s: %v", name, err)
				}
				return r.ID
			}
			live, deleting, onB, onC := create("live"), create("deleting"), create("on-b"), create("on-c")
			reserve(live, "http://a:9091", 2)
			reserve(deleting, "http://a:9091", 1)
			reserve(onB, "http://b:9091", 2)
			reserve(onC, "http://c:9091", 3)
			if _, err := st.RequestDelete(ctx, deleting); err != nil {
				t.Fatal(err)
			}
			const orphans = 1001 // more than Check reads at a time
			for range orphans {
				reserve(uuid.NewString(), "http://c:9091", 1)
			}

			err = env.Check(ctx)
			for _, want := range []string{
				"host http://b:9091 has 2 slots reserved but only 1 configured",
				"host http://c:9091 is no longer configured but holds 3 slots of 1 runtime",
			} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Check = %v; want it to say %q", err, want)
				}
			}
			left, err := st.ReservedByHost(ctx, "pool")
			if err != nil {
				t.Fatal(err)
			}
			want := []domain.HostReservations{
				{Host: "http://a:9091", Slots: 3, Resources: 2},
				{Host: "http://b:9091", Slots: 2, Resources: 1},
				{Host: "http://c:9091", Slots: 3, Resources: 1},
			}
			if fmt.Sprint(left) != fmt.Sprint(want) {
				t.Errorf("after Check the pool holds %+v; want %+v: every orphan released, the rest kept", left, want)
			}

			c, err := env.(environ.CapacityReporter).Capacity(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantCapacity := environ.Capacity{Unit: "slots", Total: 11, Used: 8, Hosts: []environ.HostCapacity{
				{Host: "http://a:9091", Total: 10, Used: 3},
				{Host: "http://b:9091", Total: 1, Used: 2},
				{Host: "http://c:9091", Used: 3},
			}}
			if fmt.Sprint(c) != fmt.Sprint(wantCapacity) {
				t.Errorf("Capacity = %+v; want %+v", c, wantCapacity)
			}
		})
	}
}

// unreleasing is a real store whose releases count and remove nothing.
type unreleasing struct {
	domain.State
	released map[string]int
}

func (s unreleasing) ReleaseSlots(_ context.Context, _, resourceID string, _ *domain.Lease) error {
	s.released[resourceID]++
	return nil
}

// TestOrphanSweepEndsWhateverReleasesDo: the sweep pages through the orphans by resource id,
// so each is released once and Check returns even when the releases remove nothing.
func TestOrphanSweepEndsWhateverReleasesDo(t *testing.T) {
	for name, open := range realStores {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st := open(t, ctx)
			slots := unreleasing{State: st, released: map[string]int{}}
			env, err := static.NewWithHTTPClient(healthyHosts{})("pool", json.RawMessage(poolOfThree), environ.Deps{Slots: slots, Resources: st})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			const orphans = 1001 // more than Check reads at a time
			for range orphans {
				req := domain.SlotRequest{Provisioner: "pool", ResourceID: uuid.NewString(), Owner: "alice", Slots: 1, HostSlots: func(string) int { return math.MaxInt32 }}
				if _, err := st.ReserveSlots(ctx, req, func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
					return "http://a:9091", nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			// The reservations stay, so host a is reported overfilled: Check has returned.
			if err := env.Check(ctx); err == nil || !strings.Contains(err.Error(), "host http://a:9091 has 1001 slots reserved") {
				t.Fatalf("Check = %v; want it to return and report a's reservations", err)
			}
			if len(slots.released) != orphans {
				t.Errorf("the sweep released %d orphans, want %d", len(slots.released), orphans)
			}
			for id, n := range slots.released {
				if n != 1 {
					t.Errorf("orphan %s released %d times, want once", id, n)
				}
			}
		})
	}
}
