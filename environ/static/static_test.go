package static

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/runtime"
)

// fakeSlots is an in-memory domain.SlotStore that keeps the contract: reservations are
// serialised per store, an existing reservation of the requested size is returned without
// calling pick, and pick sees the usage of every host holding a reservation of the provisioner,
// the resource's own included.
type fakeSlots struct {
	mu    sync.Mutex
	res   map[[2]string]domain.Reservation // by provisioner, resource ID
	picks int
	// rooms lists, for every reservation made, the room its request gives the host picked,
	// asked once the pick has run, as a store that checks its writes asks it.
	rooms []int
	// leases lists the lease of every reserve and release, in call order.
	leases []*domain.Lease
}

func newFakeSlots() *fakeSlots {
	return &fakeSlots{res: make(map[[2]string]domain.Reservation)}
}

func (f *fakeSlots) ReserveSlots(ctx context.Context, req domain.SlotRequest, pick domain.PickHost) (domain.Reservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, req.Lease)
	key := [2]string{req.Provisioner, req.ResourceID}
	var existing *domain.Reservation
	if r, ok := f.res[key]; ok {
		if r.Slots == req.Slots {
			return r, nil
		}
		existing = &r
	}
	byHost := make(map[string]int) // index in usage
	var usage []domain.HostUsage
	for _, r := range f.sorted(req.Provisioner) {
		i, ok := byHost[r.Host]
		if !ok {
			i = len(usage)
			usage = append(usage, domain.HostUsage{Host: r.Host})
			byHost[r.Host] = i
		}
		usage[i].UsedSlots += r.Slots
		if r.Owner == req.Owner {
			usage[i].OwnerResources++
		}
	}
	f.picks++
	host, err := pick(req, existing, usage)
	if err != nil {
		return domain.Reservation{}, err
	}
	f.rooms = append(f.rooms, req.HostSlots(host))
	r := domain.Reservation{Provisioner: req.Provisioner, ResourceID: req.ResourceID, Owner: req.Owner, Host: host, Slots: req.Slots}
	f.res[key] = r
	return r, nil
}

func (f *fakeSlots) ReleaseSlots(ctx context.Context, provisioner, resourceID string, lease *domain.Lease) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, lease)
	delete(f.res, [2]string{provisioner, resourceID})
	return nil
}

func (f *fakeSlots) ListReservations(ctx context.Context, provisioner string) ([]domain.Reservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sorted(provisioner), nil
}

// sorted returns the provisioner's reservations by host, resource; f.mu is held.
func (f *fakeSlots) sorted(provisioner string) []domain.Reservation {
	var out []domain.Reservation
	for key, r := range f.res {
		if key[0] == provisioner {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return out[i].ResourceID < out[j].ResourceID
	})
	return out
}

func (f *fakeSlots) put(r domain.Reservation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.res[[2]string{r.Provisioner, r.ResourceID}] = r
}

const (
	hostA = "http://a:9091"
	hostB = "http://b:9091"
)

// twoHosts is a pool of a (3 slots, own audience) and b (2 slots) with custom sizing.
const twoHosts = `{
	"runtimes": [
		{"host": "http://a:9091", "slots": 3, "audience_url": "http://aud-a:8081"},
		{"host": "http://b:9091", "slots": 2}
	],
	"cpu_per_slot": 2, "memory_gb_per_slot": 8, "storage_bytes_per_slot": 100
}`

// healthyHosts answers every health probe with 200 OK.
type healthyHosts struct{}

func (healthyHosts) Do(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Body: http.NoBody, Request: req}, nil
}

// newTestEnviron builds an environ whose hosts all answer their health probes.
func newTestEnviron(t *testing.T, name, spec string, slots domain.SlotStore) environ.Environ {
	t.Helper()
	env, err := NewWithHTTPClient(healthyHosts{})(name, json.RawMessage(spec), environ.Deps{Slots: slots})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return env
}

func runtimeRes(id string) *environ.Resource {
	return &environ.Resource{ID: id, Type: domain.ResourceTypeRuntime}
}

func withSlots(owner string, n int) *environ.ResourceOptions {
	return &environ.ResourceOptions{Owner: owner, Args: map[string]any{"slots": float64(n)}}
}

func wantResource(t *testing.T, got *environ.Resource, id, host, audience string, slots int) {
	t.Helper()
	if got.ID != id || got.Type != domain.ResourceTypeRuntime {
		t.Errorf("resource = %s %s, want %s runtime", got.ID, got.Type, id)
	}
	if got.State["host"] != host || got.State["slots"] != slots {
		t.Errorf("state = %v, want host %s, slots %d", got.State, host, slots)
	}
	cfg, err := runtime.DecodeConfig(got.Config)
	if err != nil {
		t.Fatalf("config %v does not decode: %v", got.Config, err)
	}
	want := runtime.Config{Host: host, Audience: audience, CPU: 2 * slots, MemoryGB: 8 * slots, StorageBytes: 100 * int64(slots)}
	if *cfg != want {
		t.Errorf("config = %+v, want %+v", *cfg, want)
	}
}

func TestNew(t *testing.T) {
	env := newTestEnviron(t, "pool", twoHosts, newFakeSlots())
	if env.Type() != Type || !env.Supports(domain.ResourceTypeRuntime) || env.Supports(domain.ResourceTypeClickHouse) {
		t.Errorf("type %q, supports runtime %v, clickhouse %v; want static, true, false",
			env.Type(), env.Supports(domain.ResourceTypeRuntime), env.Supports(domain.ResourceTypeClickHouse))
	}
	if err := env.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := New("pool", json.RawMessage(twoHosts), environ.Deps{}); err == nil || !strings.Contains(err.Error(), "slot store") {
		t.Errorf("New without a slot store: %v, want an error saying it needs one", err)
	}
	if _, err := New("pool", json.RawMessage(`{"runtimes": []}`), environ.Deps{Slots: newFakeSlots()}); err == nil || !strings.Contains(err.Error(), "runtimes") {
		t.Errorf("New with a bad spec: %v, want an error naming runtimes", err)
	}
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	env := newTestEnviron(t, "pool", twoHosts, store)

	got, err := env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 2))
	if err != nil {
		t.Fatalf("Reconcile r1: %v", err)
	}
	wantResource(t, got, "r1", hostA, "http://aud-a:8081", 2)

	// The same args again change nothing and do not even consult the pick policy.
	picks := store.picks
	again, err := env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 2))
	if err != nil {
		t.Fatalf("Reconcile r1 again: %v", err)
	}
	wantResource(t, again, "r1", hostA, "http://aud-a:8081", 2)
	if store.picks != picks {
		t.Errorf("reconciling unchanged args picked a host again")
	}

	// Alice's next runtime goes to b although a has as much room: owners are spread.
	got, err = env.Reconcile(ctx, runtimeRes("r2"), withSlots("alice", 1))
	if err != nil {
		t.Fatalf("Reconcile r2: %v", err)
	}
	wantResource(t, got, "r2", hostB, hostB, 1)

	// Args without slots mean one slot.
	got, err = env.Reconcile(ctx, runtimeRes("r3"), &environ.ResourceOptions{Owner: "bob"})
	if err != nil {
		t.Fatalf("Reconcile r3: %v", err)
	}
	wantResource(t, got, "r3", hostA, "http://aud-a:8081", 1)

	// Only b's last slot is left: two slots do not fit anywhere.
	_, err = env.Reconcile(ctx, runtimeRes("r4"), withSlots("carol", 2))
	if !errors.Is(err, domain.ErrNoCapacity) || environ.IsPermanent(err) {
		t.Fatalf("Reconcile r4 = %v, want an ErrNoCapacity error that is not permanent", err)
	}
	if want := `no host of provisioner "pool" has 2 free slots (largest free: 1 on http://b:9091)`; !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q, want it to say %q", err, want)
	}

	// Growing r2 in place uses b's last slot; growing r1 would need a third slot on a.
	got, err = env.Reconcile(ctx, runtimeRes("r2"), withSlots("alice", 2))
	if err != nil {
		t.Fatalf("Reconcile r2 to 2 slots: %v", err)
	}
	wantResource(t, got, "r2", hostB, hostB, 2)
	_, err = env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 3))
	if !errors.Is(err, domain.ErrNoCapacity) || !strings.Contains(err.Error(), "host http://a:9091 has 0 free slots; resize from 2 to 3 slots needs 1") {
		t.Fatalf("Reconcile r1 to 3 slots = %v, want a refused resize", err)
	}
	reservations, _ := store.ListReservations(ctx, "pool")
	want := []domain.Reservation{
		{Provisioner: "pool", ResourceID: "r1", Owner: "alice", Host: hostA, Slots: 2},
		{Provisioner: "pool", ResourceID: "r3", Owner: "bob", Host: hostA, Slots: 1},
		{Provisioner: "pool", ResourceID: "r2", Owner: "alice", Host: hostB, Slots: 2},
	}
	if !equalReservations(reservations, want) {
		t.Errorf("reservations = %+v, want %+v", reservations, want)
	}
}

// A runtime larger than the pool's largest host is refused for good, naming the largest
// size, while the pool is empty as well as full: no room that frees can hold it. So is a
// resize past all its host has, since a runtime does not move between hosts.
func TestReconcileNeverFits(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	env := newTestEnviron(t, "pool", twoHosts, store)

	_, err := env.Reconcile(ctx, runtimeRes("big"), withSlots("alice", 4))
	var nf *domain.NeverFitsError
	if !errors.As(err, &nf) || errors.Is(err, domain.ErrNoCapacity) {
		t.Fatalf("Reconcile 4 slots on hosts of 3 and 2 = %v, want a NeverFitsError that is no wait for capacity", err)
	}
	if want := `args.slots: 4 slots can never fit provisioner "pool": its largest host has 3 (raise a host's slots in the provisioner set, or ask for at most 3)`; nf.Error() != want {
		t.Errorf("error = %q, want %q", nf, want)
	}

	if _, err := env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 2)); err != nil {
		t.Fatalf("Reconcile r1: %v", err)
	}
	if _, err := env.Reconcile(ctx, runtimeRes("r2"), withSlots("bob", 2)); err != nil {
		t.Fatalf("Reconcile r2: %v", err)
	}
	// r2 is on b, which has 2 slots in all: growing it to 3 never fits there.
	_, err = env.Reconcile(ctx, runtimeRes("r2"), withSlots("bob", 3))
	if !errors.As(err, &nf) || nf.Largest != 2 || !strings.Contains(err.Error(), "the runtime's host http://b:9091 has 2") {
		t.Errorf("resize of r2 past its host = %v, want a NeverFitsError naming its host's 2 slots", err)
	}
	reservations, _ := store.ListReservations(ctx, "pool")
	want := []domain.Reservation{
		{Provisioner: "pool", ResourceID: "r1", Owner: "alice", Host: hostA, Slots: 2},
		{Provisioner: "pool", ResourceID: "r2", Owner: "bob", Host: hostB, Slots: 2},
	}
	if !equalReservations(reservations, want) {
		t.Errorf("reservations = %+v, want %+v (the refused resize keeps its slots)", reservations, want)
	}
}

func TestReconcileRefusesWhatItCannotDo(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	env := newTestEnviron(t, "pool", twoHosts, store)

	_, err := env.Reconcile(ctx, &environ.Resource{ID: "c1", Type: domain.ResourceTypeClickHouse}, withSlots("alice", 1))
	if !environ.IsPermanent(err) || !strings.Contains(err.Error(), `provisioner "pool"`) || !strings.Contains(err.Error(), "clickhouse") {
		t.Errorf("Reconcile clickhouse = %v, want a permanent error naming the provisioner and the type", err)
	}
	_, err = env.CheckResource(ctx, &environ.Resource{ID: "c1", Type: domain.ResourceTypeClickHouse}, withSlots("alice", 1))
	if !environ.IsPermanent(err) {
		t.Errorf("CheckResource clickhouse = %v, want a permanent error", err)
	}

	for _, args := range []map[string]any{{"slots": float64(0)}, {"slots": "2"}, {"size": float64(1)}} {
		_, err = env.Reconcile(ctx, runtimeRes("r1"), &environ.ResourceOptions{Args: args})
		var fe *domain.FieldError
		if !environ.IsPermanent(err) || !errors.As(err, &fe) {
			t.Errorf("Reconcile with args %v = %v, want a permanent *domain.FieldError", args, err)
		}
	}
	if reservations, _ := store.ListReservations(ctx, "pool"); len(reservations) != 0 {
		t.Errorf("refused reconciles left reservations %+v", reservations)
	}
}

func TestReconcileMovesRuntimeOffRemovedHost(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	store.put(domain.Reservation{Provisioner: "pool", ResourceID: "r1", Owner: "alice", Host: "http://old:9091", Slots: 2})
	store.put(domain.Reservation{Provisioner: "pool", ResourceID: "r2", Owner: "alice", Host: "http://old:9091", Slots: 3})
	store.put(domain.Reservation{Provisioner: "pool", ResourceID: "r3", Owner: "bob", Host: hostB, Slots: 1})
	env := newTestEnviron(t, "pool", twoHosts, store)

	// Same size: released and placed again, on a (3 free) rather than b (1 free).
	got, err := env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 2))
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	wantResource(t, got, "r1", hostA, "http://aud-a:8081", 2)
	if got.Notice != "moved from http://old:9091, which is no longer configured, to http://a:9091" {
		t.Errorf("notice = %q, want the move", got.Notice)
	}

	// No configured host has 3 free slots: r2 keeps its reservation and waits for room.
	_, err = env.Reconcile(ctx, runtimeRes("r2"), withSlots("alice", 3))
	if !errors.Is(err, domain.ErrNoCapacity) || !strings.Contains(err.Error(), "http://old:9091 is no longer configured") {
		t.Errorf("moving without room = %v, want ErrNoCapacity saying the host is gone", err)
	}
	if kept, _ := store.ListReservations(ctx, "pool"); len(kept) != 3 || kept[2].ResourceID != "r2" || kept[2].Host != "http://old:9091" || kept[2].Slots != 3 {
		t.Errorf("reservations after a refused move = %+v, want r2 still holding 3 slots on old", kept)
	}
	// A resize moves it within the store's own transaction, spreading alice to b.
	got, err = env.Reconcile(ctx, runtimeRes("r2"), withSlots("alice", 1))
	if err != nil {
		t.Fatalf("Reconcile with a shrink: %v", err)
	}
	wantResource(t, got, "r2", hostB, hostB, 1)
	if got.Notice == "" {
		t.Error("a move by resize has no notice")
	}
	reservations, _ := store.ListReservations(ctx, "pool")
	want := []domain.Reservation{
		{Provisioner: "pool", ResourceID: "r1", Owner: "alice", Host: hostA, Slots: 2},
		{Provisioner: "pool", ResourceID: "r2", Owner: "alice", Host: hostB, Slots: 1},
		{Provisioner: "pool", ResourceID: "r3", Owner: "bob", Host: hostB, Slots: 1},
	}
	if !equalReservations(reservations, want) {
		t.Errorf("reservations = %+v, want %+v", reservations, want)
	}

	// Reconciling a moved runtime again is a no-op with nothing to report.
	got, err = env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 2))
	if err != nil || got.State["host"] != hostA || got.Notice != "" {
		t.Errorf("Reconcile again = %+v, %v; want it on a without a notice", got, err)
	}
}

func TestResourceSpecLeavesOutHealthProbing(t *testing.T) {
	build := func(spec string) string {
		t.Helper()
		set, err := newStaticRegistry().NewSet([]byte(`{"pool": {"type": "static", "spec": `+spec+`}}`), "", environ.Deps{Slots: newFakeSlots()})
		if err != nil {
			t.Fatalf("NewSet: %v", err)
		}
		fp, err := set.Fingerprint("pool")
		if err != nil {
			t.Fatalf("Fingerprint: %v", err)
		}
		return fp
	}
	base := build(`{"runtimes": [{"host": "http://a:9091", "slots": 3}]}`)
	same := []string{
		`{"runtimes": [{"host": "HTTP://A:9091/", "slots": 3}], "health_path": "/ready", "health_timeout_seconds": 9}`,
		`{"runtimes": [{"slots": 3, "host": "http://a:9091", "audience_url": "http://a:9091"}], "cpu_per_slot": 1}`,
	}
	for _, spec := range same {
		if got := build(spec); got != base {
			t.Errorf("fingerprint of %s = %s, want the base's %s", spec, got, base)
		}
	}
	changed := []string{
		`{"runtimes": [{"host": "http://a:9091", "slots": 4}]}`,
		`{"runtimes": [{"host": "http://a:9091", "slots": 3}, {"host": "http://b:9091", "slots": 1}]}`,
		`{"runtimes": [{"host": "http://a:9091", "slots": 3, "audience_url": "http://aud:1"}]}`,
		`{"runtimes": [{"host": "http://a:9091", "slots": 3}], "memory_gb_per_slot": 16}`,
	}
	for _, spec := range changed {
		if got := build(spec); got == base {
			t.Errorf("fingerprint of %s = the base's, want a change", spec)
		}
	}
}

func newStaticRegistry() *environ.Registry {
	r := environ.NewRegistry()
	r.Register(Type, NewWithHTTPClient(healthyHosts{}))
	return r
}

// TestEverySlotWriteCarriesTheLease: Reconcile (a move's release and reservations
// included) and Deprovision pass the caller's lease with every slot write, so the store can
// refuse them all once the lease is fenced.
func TestEverySlotWriteCarriesTheLease(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	store.put(domain.Reservation{Provisioner: "pool", ResourceID: "r1", Owner: "alice", Host: "http://old:9091", Slots: 2})
	env := newTestEnviron(t, "pool", twoHosts, store)
	lease := &domain.Lease{Holder: "agent-a", Token: 7}
	r := &environ.Resource{ID: "r1", Type: domain.ResourceTypeRuntime, Lease: lease}

	got, err := env.Reconcile(ctx, r, withSlots("alice", 2))
	if err != nil || got.Notice == "" {
		t.Fatalf("Reconcile = %+v, %v; want a move off the removed host", got, err)
	}
	if got.Lease != nil {
		t.Errorf("Reconcile returned the lease %+v; want it left out of the resource it returns", got.Lease)
	}
	if err := env.Deprovision(ctx, r); err != nil {
		t.Fatal(err)
	}
	// reserve (handed back), release, reserve elsewhere, release.
	if len(store.leases) != 4 {
		t.Fatalf("%d slot writes; want 4", len(store.leases))
	}
	for i, l := range store.leases {
		if l != lease {
			t.Errorf("slot write %d carried %+v; want the caller's lease", i+1, l)
		}
	}
}

func TestDeprovision(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	env := newTestEnviron(t, "pool", twoHosts, store)
	other := newTestEnviron(t, "other", twoHosts, store)
	for _, e := range []environ.Environ{env, other} {
		if _, err := e.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 3)); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
	}

	for i := 0; i < 2; i++ {
		if err := env.Deprovision(ctx, runtimeRes("r1")); err != nil {
			t.Fatalf("Deprovision #%d: %v", i+1, err)
		}
	}
	if err := env.Deprovision(ctx, runtimeRes("never-reconciled")); err != nil {
		t.Errorf("Deprovision of a runtime never reconciled: %v", err)
	}
	if reservations, _ := store.ListReservations(ctx, "pool"); len(reservations) != 0 {
		t.Errorf("reservations after Deprovision: %+v", reservations)
	}
	if reservations, _ := store.ListReservations(ctx, "other"); len(reservations) != 1 {
		t.Errorf("Deprovision released another provisioner's reservation: %+v", reservations)
	}
	// The freed slots are usable again.
	if _, err := env.Reconcile(ctx, runtimeRes("r2"), withSlots("bob", 3)); err != nil {
		t.Errorf("Reconcile after Deprovision: %v", err)
	}
}

func TestAwaitReady(t *testing.T) {
	env := newTestEnviron(t, "pool", twoHosts, newFakeSlots())
	placed, err := env.Reconcile(context.Background(), runtimeRes("r1"), withSlots("alice", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.AwaitReady(context.Background(), placed); err != nil {
		t.Errorf("AwaitReady: %v", err)
	}
	if err := env.AwaitReady(context.Background(), runtimeRes("r1")); err == nil || !strings.Contains(err.Error(), "names no host") {
		t.Errorf("AwaitReady of a runtime never placed = %v, want an error saying so", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := env.AwaitReady(ctx, placed); !errors.Is(err, context.Canceled) {
		t.Errorf("AwaitReady with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	env := newTestEnviron(t, "pool", twoHosts, store)
	if err := env.Check(ctx); err != nil {
		t.Errorf("Check of an empty pool: %v", err)
	}
	for _, id := range []string{"r1", "r2"} {
		if _, err := env.Reconcile(ctx, runtimeRes(id), withSlots("alice", 2)); err != nil {
			t.Fatalf("Reconcile %s: %v", id, err)
		}
	}
	if _, err := env.Reconcile(ctx, runtimeRes("r3"), withSlots("bob", 1)); err != nil {
		t.Fatalf("Reconcile r3: %v", err)
	}
	if err := env.Check(ctx); err != nil {
		t.Errorf("Check of a full, configured pool: %v", err)
	}

	// The operator drops b and cuts a to 2 slots: a holds 3, b's runtime is stranded.
	shrunk := newTestEnviron(t, "pool", `{"runtimes": [{"host": "http://a:9091", "slots": 2}, {"host": "http://c:9091", "slots": 5}]}`, store)
	err := shrunk.Check(ctx)
	if err == nil {
		t.Fatal("Check after the spec dropped b and shrank a: nil, want an error")
	}
	for _, want := range []string{
		`provisioner "pool"`,
		"host http://a:9091 has 3 slots reserved but only 2 configured",
		"host http://b:9091 is no longer configured but holds 2 slots of 1 runtime",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check = %q, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "c:9091") {
		t.Errorf("Check = %q, names a healthy host", err)
	}
}

func TestCheckResource(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	env := newTestEnviron(t, "pool", twoHosts, store)
	if _, err := env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 2)); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}

	// A resource with stale state gets the reservation's state and config back.
	stale := &environ.Resource{ID: "r1", Type: domain.ResourceTypeRuntime, State: map[string]any{"host": hostB, "slots": 1}}
	got, err := env.CheckResource(ctx, stale, withSlots("alice", 2))
	if err != nil {
		t.Fatalf("CheckResource: %v", err)
	}
	wantResource(t, got, "r1", hostA, "http://aud-a:8081", 2)

	// A lost reservation is made again.
	if err := store.ReleaseSlots(ctx, "pool", "r1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Reconcile(ctx, runtimeRes("r2"), withSlots("bob", 2)); err != nil {
		t.Fatalf("Reconcile r2: %v", err)
	}
	got, err = env.CheckResource(ctx, runtimeRes("r1"), withSlots("alice", 2))
	if err != nil {
		t.Fatalf("CheckResource of a lost reservation: %v", err)
	}
	wantResource(t, got, "r1", hostB, hostB, 2)
	reservations, _ := store.ListReservations(ctx, "pool")
	want := []domain.Reservation{
		{Provisioner: "pool", ResourceID: "r2", Owner: "bob", Host: hostA, Slots: 2},
		{Provisioner: "pool", ResourceID: "r1", Owner: "alice", Host: hostB, Slots: 2},
	}
	if !equalReservations(reservations, want) {
		t.Errorf("reservations = %+v, want %+v", reservations, want)
	}

	// With no room left the repair says so and waits for room.
	if err := store.ReleaseSlots(ctx, "pool", "r1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Reconcile(ctx, runtimeRes("r3"), withSlots("carol", 2)); err != nil {
		t.Fatalf("Reconcile r3: %v", err)
	}
	if _, err := env.CheckResource(ctx, runtimeRes("r1"), withSlots("alice", 2)); !errors.Is(err, domain.ErrNoCapacity) {
		t.Errorf("CheckResource with the pool full = %v, want ErrNoCapacity", err)
	}
}

func equalReservations(a, b []domain.Reservation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSlotSizesNeverOverflow: sizing as large as the pool's largest host allows gives that
// host's runtimes exact sizes, and a reservation larger than the host (made before its
// slots were cut) is refused naming the sizing, never handed out as a negative size.
func TestSlotSizesNeverOverflow(t *testing.T) {
	ctx := context.Background()
	store := newFakeSlots()
	const perSlot = math.MaxInt64 / 4
	spec := fmt.Sprintf(`{"runtimes": [{"host": %q, "slots": 4}], "storage_bytes_per_slot": %d}`, hostA, perSlot)
	env := newTestEnviron(t, "pool", spec, store)
	got, err := env.Reconcile(ctx, runtimeRes("r1"), withSlots("alice", 4))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := runtime.DecodeConfig(got.Config); err != nil || cfg.StorageBytes != 4*perSlot {
		t.Errorf("config = %+v, %v; want storage_bytes %d", cfg, err, int64(4*perSlot))
	}

	store.put(domain.Reservation{Provisioner: "pool", ResourceID: "r2", Owner: "bob", Host: hostA, Slots: 5})
	r2 := &environ.Resource{ID: "r2", Type: domain.ResourceTypeRuntime, State: map[string]any{"host": hostA, "slots": 5}}
	for name, call := range map[string]func() (*environ.Resource, error){
		"Reconcile":     func() (*environ.Resource, error) { return env.Reconcile(ctx, r2, withSlots("bob", 5)) },
		"CheckResource": func() (*environ.Resource, error) { return env.CheckResource(ctx, r2, withSlots("bob", 5)) },
	} {
		res, err := call()
		if err == nil || !environ.IsPermanent(err) || !strings.Contains(err.Error(), "storage_bytes_per_slot: 2305843009213693951 per slot times 5 slots is more than a 64-bit size holds") {
			t.Errorf("%s of a 5-slot runtime = %+v, %v; want a permanent error naming storage_bytes_per_slot", name, res, err)
		}
	}
}

// TestSlotsBoundIsTheCLIs: a row a client wrote with a slot count the CLI would refuse is
// refused by the agent with the CLI's words, as a permanent failure.
func TestSlotsBoundIsTheCLIs(t *testing.T) {
	env := newTestEnviron(t, "pool", twoHosts, newFakeSlots())
	_, cliErr := runtime.Type.ParseArgFlags([]string{"slots=2147483648"})
	_, err := env.Reconcile(context.Background(), runtimeRes("r1"), &environ.ResourceOptions{Args: map[string]any{"slots": float64(1 << 31)}})
	if cliErr == nil || err == nil || !strings.HasSuffix(err.Error(), cliErr.Error()) || !environ.IsPermanent(err) {
		t.Errorf("Reconcile with 2147483648 slots = %v; want the CLI's refusal %v, permanent", err, cliErr)
	}
}

// The room a reservation's write is checked against on a host leaves out what reservations
// naming the host by another spelling of its URL hold, as placement counts every spelling
// against the host; a reservation that grows under another spelling moves to the configured
// one, so that the other spellings only lose slots.
func TestReservationRoomCountsOtherSpellingsOfTheHost(t *testing.T) {
	slots := newFakeSlots()
	slots.res[[2]string{"pool", "other"}] = domain.Reservation{Provisioner: "pool", ResourceID: "other", Owner: "bob", Host: "HTTP://A:9091/", Slots: 3}
	env := newTestEnviron(t, "pool", `{"runtimes": [{"host": "http://a:9091", "slots": 10}]}`, slots)
	for _, r := range []struct {
		id, owner string
		slots     int
	}{{"r1", "alice", 2}, {"other", "bob", 4}} {
		if _, err := env.Reconcile(t.Context(), runtimeRes(r.id), withSlots(r.owner, r.slots)); err != nil {
			t.Fatalf("reconcile %s: %v", r.id, err)
		}
	}
	// r1 goes to the configured spelling: 10 slots less the other spelling's 3. The other
	// runtime grows onto the configured spelling too, its own 3 leaving the other: 10.
	if want := []int{7, 10}; !slices.Equal(slots.rooms, want) {
		t.Errorf("rooms %v; want %v", slots.rooms, want)
	}
	if got := slots.res[[2]string{"pool", "other"}].Host; got != "http://a:9091" {
		t.Errorf("the grown reservation is on %s; want the configured spelling", got)
	}
}
