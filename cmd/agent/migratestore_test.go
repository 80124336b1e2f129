package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/juju/clock"
	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/internal/e2etest"
	"github.com/berth-dev/berth/internal/pgtest"
)

// hostSlots is the size of each host of migrateSet.
const hostSlots = 4

// migrateSet is a static pool of two hosts that are only names: health probes are off, so
// nothing is ever probed.
const migrateSet = `{"pool": {"type": "static", "spec": {"health_path": "", "runtimes": [
	{"host": "http://host-a.test:9091", "slots": 4, "data_dir": "/data", "audience_url": "http://host-a.test:8081"},
	{"host": "http://host-b.test:9091", "slots": 4, "data_dir": "/data", "audience_url": "http://host-b.test:8081"}]}}}`

func sqliteURL(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "berth.db")
}

func openTestStore(t *testing.T, url string) store.DB {
	t.Helper()
	st, err := store.Open(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// migratedStore is an SQLite store with the schema, holding one resource.
func migratedStore(t *testing.T) (string, store.DB, domain.Resource) {
	t.Helper()
	url := sqliteURL(t)
	st := openTestStore(t, url)
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := st.CreateResource(context.Background(), domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "acme",
		Args: map[string]any{"slots": 1}})
	if err != nil {
		t.Fatal(err)
	}
	return url, st, r
}

func migrateStoreCmd(args ...string) (string, string, error) {
	return runBerth(testclock.NewClock(time.Now()), append([]string{"migrate-store"}, args...)...)
}

// agentInProcess is `berth run` running in the test's process.
type agentInProcess struct {
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// startAgentInProcess runs the agent on the database with migrateSet until stop.
func startAgentInProcess(t *testing.T, dbURL string) *agentInProcess {
	t.Helper()
	setPath := filepath.Join(t.TempDir(), "provisioners.json")
	if err := os.WriteFile(setPath, []byte(migrateSet), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newRootCommandWith(&globalOptions{clock: clock.WallClock, pollInterval: time.Second})
	cmd.SetArgs([]string{"run", "--database-url", dbURL, "--provisioners", setPath, "--agent-id", "agent-1",
		"--http-addr", "127.0.0.1:0", "--log-level", "warn", "--poll-interval", "100ms",
		"--health-interval", "1h", "--capacity-interval", "1h"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	a := &agentInProcess{cancel: cancel, done: make(chan error, 1)}
	go func() { a.done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() { a.stop(t) })
	return a
}

// stop stops the agent as SIGTERM would and requires a clean exit.
func (a *agentInProcess) stop(t *testing.T) {
	t.Helper()
	if a.stopped {
		return
	}
	a.stopped = true
	a.cancel()
	select {
	case err := <-a.done:
		if err != nil {
			t.Errorf("the agent stopped with %v", err)
		}
	case <-time.After(e2etest.StopTimeout):
		t.Fatalf("the agent did not stop within %s", e2etest.StopTimeout)
	}
}

func waitUntilReady(t *testing.T, st domain.ResourceStore, ids ...string) {
	t.Helper()
	for _, id := range ids {
		e2etest.Eventually(t, "resource "+id+" ready", 30*time.Second, func() (bool, string) {
			r, err := st.GetResource(context.Background(), id)
			if err != nil {
				return false, err.Error()
			}
			return r.Status == domain.StatusReady && r.ObservedGeneration == r.Generation, string(r.Status) + ": " + r.StatusMessage
		})
	}
}

// seen is what the store API shows of a resource, times to the millisecond.
type seen struct {
	Resource domain.Resource
	Events   []domain.Event
}

func look(t *testing.T, st domain.State, id string) seen {
	t.Helper()
	ctx := context.Background()
	r, err := st.GetResource(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC().Truncate(time.Millisecond), r.UpdatedAt.UTC().Truncate(time.Millisecond)
	for _, p := range []**time.Time{&r.NextAttemptAt, &r.ReadyAt, &r.UnhealthySince} {
		if *p != nil {
			v := (**p).UTC().Truncate(time.Millisecond)
			*p = &v
		}
	}
	es, err := st.ListEvents(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range es {
		es[i].At = es[i].At.UTC().Truncate(time.Millisecond)
	}
	return seen{Resource: r, Events: es}
}

// An install moved from SQLite to PostgreSQL carries on there: the agent provisions what was
// pending, leaves the ready resources as they were (no provisioning again, no new events)
// and places the new one around the reservations it found, keeps the owner's policy, and
// admits it against the owner's quota with the usage the agent on SQLite admitted.
func TestMigrateStoreThenTheAgentCarriesOnFromTheCopy(t *testing.T) {
	clearEnv(t)
	ctx := context.Background()
	liteURL, pgURL := sqliteURL(t), pgtest.New(t)
	if _, _, err := runBerth(testclock.NewClock(time.Now()), "migrate", "--database-url", liteURL); err != nil {
		t.Fatal(err)
	}
	lite := openTestStore(t, liteURL)
	create := func(name string, slots int) string {
		t.Helper()
		r, err := lite.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "acme",
			Args: map[string]any{"slots": slots}})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	policy := domain.OwnerPolicy{Owner: "acme", Weight: 2, Class: "gold"}
	if _, err := lite.SetOwnerPolicy(ctx, policy); err != nil {
		t.Fatal(err)
	}
	maxResources, maxSlots := int64(4), int64(7)
	if _, err := lite.SetQuota(ctx, domain.QuotaChange{Owner: "acme", Provisioner: "pool",
		Resources: domain.QuotaLimit{Set: true, Max: &maxResources}, Slots: domain.QuotaLimit{Set: true, Max: &maxSlots}}); err != nil {
		t.Fatal(err)
	}
	usage := func(st store.DB) (resources, slots int64) {
		t.Helper()
		q, err := st.ListQuotas(ctx, domain.QuotaFilter{Owner: "acme", Provisioner: "pool"})
		if err != nil || len(q) != 1 {
			t.Fatalf("acme's quota on pool: %+v, %v; want it", q, err)
		}
		if *q[0].MaxResources != maxResources || *q[0].MaxSlots != maxSlots {
			t.Errorf("acme's quota on pool: %d resources, %d slots; want %d, %d", *q[0].MaxResources, *q[0].MaxSlots, maxResources, maxSlots)
		}
		return q[0].Resources, q[0].Slots
	}
	agent := startAgentInProcess(t, liteURL)
	ready := []string{create("web-1", 2), create("web-2", 2), create("db-1", 1)}
	waitUntilReady(t, lite, ready...)
	agent.stop(t)
	late := create("late", 2)

	before := map[string]seen{}
	for _, id := range append(ready, late) {
		before[id] = look(t, lite, id)
	}
	reservations, err := lite.ListReservations(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if len(reservations) != len(ready) {
		t.Fatalf("reservations on SQLite: %+v; want one per ready resource", reservations)
	}

	out, stderr, err := migrateStoreCmd("--from", liteURL, "--to", pgURL, "-o", "json")
	if err != nil {
		t.Fatalf("migrate-store: %v\n%s", err, stderr)
	}
	var summary struct {
		Verified bool `json:"verified"`
		Tables   []struct {
			Table string `json:"table"`
			Rows  int64  `json:"rows"`
		} `json:"tables"`
	}
	decodeOne(t, out, &summary)
	rows := map[string]int64{}
	for _, tr := range summary.Tables {
		rows[tr.Table] = tr.Rows
	}
	if !summary.Verified || rows["resources"] != 4 || rows["slot_reservations"] != 3 || rows["provisioner_specs"] != 1 || rows["resource_events"] == 0 ||
		rows["owner_policies"] != 1 || rows["owner_quotas"] != 1 {
		t.Errorf("summary %s; want 4 resources, 3 reservations, 1 spec, the events, 1 owner policy and 1 quota, verified", out)
	}
	if !strings.Contains(stderr, "resources") || !strings.Contains(stderr, "4/4") {
		t.Errorf("progress %q; want each table's count", stderr)
	}

	pg := openTestStore(t, pgURL)
	if resources, slots := usage(pg); resources != 3 || slots != 5 {
		t.Errorf("acme's usage on pool after the copy: %d resources, %d slots; want the 3 and 5 admitted on SQLite", resources, slots)
	}
	if got, err := pg.OwnerPolicy(ctx, "acme"); err != nil || got.Weight != policy.Weight || got.Class != policy.Class {
		t.Errorf("acme's policy after the copy: %+v, %v; want %+v", got, err, policy)
	}
	for id, want := range before {
		if got := look(t, pg, id); !reflect.DeepEqual(got, want) {
			t.Errorf("resource %s on PostgreSQL:\n%+v\nwant, as on SQLite:\n%+v", id, got, want)
		}
	}

	startAgentInProcess(t, pgURL)
	waitUntilReady(t, pg, late)
	for _, id := range ready {
		if got := look(t, pg, id); !reflect.DeepEqual(got, before[id]) {
			t.Errorf("ready resource %s changed under the agent on the copy:\n%+v\nwas\n%+v", id, got, before[id])
		}
	}
	after, err := pg.ListReservations(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]int{}
	kept := 0
	for _, r := range after {
		used[r.Host] += r.Slots
		for _, old := range reservations {
			if old == r {
				kept++
			}
		}
	}
	if kept != len(reservations) || len(after) != len(reservations)+1 {
		t.Errorf("reservations after the agent ran on the copy: %+v; want %+v and one for the late resource", after, reservations)
	}
	for host, slots := range used {
		if slots > hostSlots {
			t.Errorf("host %s holds %d slots of %d: the copied reservations were not respected", host, slots, hostSlots)
		}
	}
	if resources, slots := usage(pg); resources != 4 || slots != 7 {
		t.Errorf("acme's usage on pool once the late resource is ready: %d resources, %d slots; want 4, 7", resources, slots)
	}
	if got := look(t, lite, late); !reflect.DeepEqual(got, before[late]) {
		t.Errorf("the source changed: %+v; want it as it was", got)
	}
}

// An agent on the source file holds its lock: the copy is refused before anything is done
// to the target.
func TestMigrateStoreRefusesWhileAnAgentRunsOnTheSource(t *testing.T) {
	clearEnv(t)
	liteURL, _, _ := migratedStore(t)
	target := sqliteURL(t)
	release, err := store.LockAgent(liteURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = release() }()
	_, _, err = migrateStoreCmd("--from", liteURL, "--to", target)
	want := fmt.Sprintf("is in use by a berth agent (pid %d): stop every agent on it first", os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("migrate-store with an agent on the source: %v; want %q", err, want)
	}
	if _, err := os.Stat(strings.TrimPrefix(target, "sqlite://")); !os.IsNotExist(err) {
		t.Errorf("the target file exists after a refused copy (%v); want it untouched", err)
	}
}

// A target with data is refused and left as it was; --from defaults to --database-url.
func TestMigrateStoreRefusesATargetWithData(t *testing.T) {
	clearEnv(t)
	source, _, _ := migratedStore(t)
	target, st, r := migratedStore(t)
	_, _, err := migrateStoreCmd("--database-url", source, "--to", target)
	if err == nil || !strings.Contains(err.Error(), "already holds Berth data (1 resources, 1 resource_events, 1 change_log)") ||
		!strings.Contains(err.Error(), "give --to a new database or SQLite file") {
		t.Fatalf("migrate-store into a store with data: %v; want a refusal naming what it holds", err)
	}
	rs, err := st.ListResources(context.Background(), domain.ListFilter{})
	if err != nil || len(rs) != 1 || rs[0].ID != r.ID {
		t.Errorf("target after the refusal: %+v, %v; want its one resource", rs, err)
	}

	empty := sqliteURL(t)
	out, _, err := migrateStoreCmd("--database-url", source, "--to", empty)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"into SQLite file " + strings.TrimPrefix(empty, "sqlite://"), "every table verified", "resources", "next: run the agents"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestMigrateStoreBadInput(t *testing.T) {
	clearEnv(t)
	source, _, _ := migratedStore(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", source}, "--to is required"},
		{[]string{"--from", source, "--to", source}, "--from and --to are both SQLite file"},
		{[]string{"--from", source, "--to", "mysql://db/berth"}, "--to: database URL"},
		{[]string{"--from", sqliteURL(t), "--to", source}, "--from: SQLite file"},
		{[]string{"--from", source, "--to", "postgres://berth:s3cret@127.0.0.1:1/berth?connect_timeout=5"}, "open the target"},
	} {
		_, _, err := migrateStoreCmd(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("migrate-store %q: %v; want an error saying %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("migrate-store %q: the error shows the password: %v", tc.args, err)
		}
	}
}

func TestMigrateStoreJSONIsOneObject(t *testing.T) {
	clearEnv(t)
	source, _, _ := migratedStore(t)
	out, _, err := migrateStoreCmd("--from", source, "--to", sqliteURL(t), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]json.RawMessage
	decodeOne(t, out, &v)
	for _, key := range []string{"from", "to", "verified", "tables", "change_log_position", "events_position", "live_leases"} {
		if _, ok := v[key]; !ok {
			t.Errorf("-o json lacks %q: %s", key, out)
		}
	}
}
