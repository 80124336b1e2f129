package storecopy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/domain/sqlite"
	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/domain/storecopy"
	"github.com/berth-dev/berth/internal/pgtest"
)

const testTimeout = time.Minute

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// backend is a store under test: the State, its copy side, and direct SQL.
type backend struct {
	store.DB
	storecopy.Store
	kind store.Kind
}

func openBackend(t *testing.T, url string, migrate bool) *backend {
	t.Helper()
	ctx := testContext(t)
	db, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if migrate {
		if err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	loc, err := store.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	return &backend{DB: db, Store: db.(storecopy.Store), kind: loc.Kind}
}

func newPostgres(t *testing.T) *backend { return openBackend(t, pgtest.New(t), true) }

func newSQLite(t *testing.T) *backend {
	return openBackend(t, "sqlite://"+filepath.Join(t.TempDir(), "berth.db"), true)
}

// exec runs one statement directly, as another program would.
func (b *backend) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	ctx := testContext(t)
	var err error
	switch st := b.DB.(type) {
	case *postgres.State:
		_, err = st.Pool().Exec(ctx, query, args...)
	case *sqlite.State:
		_, err = st.DB().ExecContext(ctx, query, args...)
	default:
		t.Fatalf("no direct SQL for %T", b.DB)
	}
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// bulkInsert adds n pending runtimes named bulk-0 ... bulk-(n-1) in one statement.
func (b *backend) bulkInsert(t *testing.T, n int) {
	t.Helper()
	if b.kind == store.Postgres {
		b.exec(t, `INSERT INTO resources (type, name, owner, args)
			SELECT 'runtime', 'bulk-' || i, 'owner-' || (i % 7), '{"slots": 1}' FROM generate_series(0, $1 - 1) AS i`, n)
		return
	}
	b.exec(t, `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < $1 - 1)
		INSERT INTO resources (type, name, owner, args) SELECT 'runtime', 'bulk-' || i, 'owner-' || (i % 7), '{"slots": 1}' FROM s`, n)
}

// statuses are the resources populate leaves in each status.
var statuses = map[string]domain.Status{
	"pending":      domain.StatusPending,
	"retrying":     domain.StatusPending,
	"provisioning": domain.StatusProvisioning,
	"ready":        domain.StatusReady,
	"resized":      domain.StatusReady,
	"unhealthy":    domain.StatusUnhealthy,
	"failed":       domain.StatusError,
	"deleting":     domain.StatusDeleting,
	"hibernated":   domain.StatusHibernated,
}

// populate writes what a store that has been in use holds: resources in every status (with
// leases, retries, health and args changes), reservations, the history of a removed
// resource, capacity samples and warnings, spec fingerprints, owner policies, quotas and the
// admissions against them, many rows (more than a batch), and a change log and history whose
// newest entries were removed, so that their positions are above every row's.
func populate(t *testing.T, b *backend) {
	t.Helper()
	ctx := testContext(t)
	const holder = "agent-a"
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	ids := map[string]string{}
	for _, name := range sortedKeys(statuses) {
		r, err := b.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "alice",
			Args: map[string]any{"slots": 2, "labels": map[string]any{"team": "data"}}, Labels: map[string]string{"app": name}})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = r.ID
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	leases := map[string]domain.Lease{}
	progress := func(name string, u domain.ProgressUpdate) {
		t.Helper()
		c, err := b.ClaimResource(ctx, ids[name], holder, time.Hour)
		must("claim "+name, err)
		leases[name] = c.Lease
		if u.Generation == 0 {
			u.Generation = 1
		}
		_, err = b.RecordProgress(ctx, ids[name], c.Lease, u)
		must("progress of "+name, err)
	}
	for _, p := range ownerPolicies {
		_, err := b.SetOwnerPolicy(ctx, p)
		must("owner policy of "+p.Owner, err)
	}
	for _, q := range quotas {
		_, err := b.SetQuota(ctx, domain.QuotaChange{Owner: q.Owner, Provisioner: q.Provisioner,
			Resources: domain.QuotaLimit{Set: true, Max: q.MaxResources}, Slots: domain.QuotaLimit{Set: true, Max: q.MaxSlots}})
		must("quota of "+q.Owner+" on "+q.Provisioner, err)
	}
	observed := int64(1)
	provisioned := func(name, host string) {
		t.Helper()
		progress(name, domain.ProgressUpdate{Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "ready at generation 1", Provisioner: "pool",
			State: map[string]any{"host": host, "port": 9000}, Config: map[string]any{"url": "http://" + host + ":9000"},
			ObservedGeneration: &observed})
		units, err := b.AdmitResource(ctx, ids[name], leases[name], domain.Admission{Provisioner: "pool", Units: 2})
		must("admit "+name, err)
		if units != 2 {
			t.Fatalf("admit %s: at %d units; want 2", name, units)
		}
		must("release "+name, b.ReleaseResource(ctx, ids[name], leases[name]))
		_, err = b.ReserveSlots(ctx, domain.SlotRequest{Provisioner: "pool", ResourceID: ids[name], Owner: "alice", Slots: 2, HostSlots: func(string) int { return math.MaxInt32 }},
			func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) { return host, nil })
		must("reserve for "+name, err)
	}
	// Waiting for capacity: its reason and waiting_since are copied with it.
	progress("retrying", domain.ProgressUpdate{Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity, StatusMessage: "attempt 2 failed: host busy",
		Provisioner: "pool", Attempts: 2, RetryIn: time.Minute, LastError: "host busy"})
	must("release retrying", b.ReleaseResource(ctx, ids["retrying"], leases["retrying"]))
	// Left with its lease live, as an agent stopped mid-reconcile leaves it.
	progress("provisioning", domain.ProgressUpdate{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "provisioning on host-a",
		Provisioner: "pool", State: map[string]any{"host": "host-a"}})
	provisioned("ready", "host-a")
	provisioned("resized", "host-b")
	_, err := b.UpdateResourceArgs(ctx, ids["resized"], map[string]any{"slots": 4})
	must("resize", err)
	provisioned("unhealthy", "host-b")
	checked, err := b.GetResource(ctx, ids["unhealthy"])
	must("read unhealthy", err)
	_, err = b.RecordHealth(ctx, ids["unhealthy"], checked.CheckedBy(holder), domain.HealthUpdate{Status: domain.StatusUnhealthy,
		Reason: domain.ReasonHealthCheckFailed, StatusMessage: "health probe failed", UnhealthySince: at, Repairs: []string{"restarted the runtime"}})
	must("record health", err)
	progress("failed", domain.ProgressUpdate{Status: domain.StatusError, Reason: domain.ReasonBrokerError, StatusMessage: "args.slots: must be at most 8",
		Provisioner: "pool", Attempts: 1, LastError: "args.slots: must be at most 8"})
	must("release failed", b.ReleaseResource(ctx, ids["failed"], leases["failed"]))
	provisioned("deleting", "host-a")
	_, err = b.RequestDelete(ctx, ids["deleting"])
	must("request delete", err)
	// The lifecycle controls, each left set: labels changed, paused, a retry asked for, and
	// a resource hibernated.
	_, err = b.SetLabels(ctx, ids["ready"], map[string]string{"team": "data", "tier": "prod"})
	must("label", err)
	_, err = b.SetPaused(ctx, ids["resized"], true)
	must("pause", err)
	_, err = b.RequestRetry(ctx, ids["failed"])
	must("retry", err)
	_, err = b.SetHibernate(ctx, ids["hibernated"], true)
	must("hibernate", err)
	progress("hibernated", domain.ProgressUpdate{Status: domain.StatusHibernated, Reason: domain.ReasonHibernated, StatusMessage: "hibernated",
		Provisioner: "pool", State: map[string]any{"host": "host-a"}})
	must("release hibernated", b.ReleaseResource(ctx, ids["hibernated"], leases["hibernated"]))

	gone, err := b.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeClickHouse, Name: "gone", Owner: "bob"})
	must("create gone", err)
	_, err = b.RequestDelete(ctx, gone.ID)
	must("delete gone", err)
	goneClaim, err := b.ClaimResource(ctx, gone.ID, holder, time.Hour)
	must("claim gone", err)
	must("finalize gone", b.FinalizeDelete(ctx, gone.ID, goneClaim.Lease))

	// JSON a client wrote by hand: spacing, key order, a number beyond float64, a 1.50.
	b.exec(t, `INSERT INTO resources (type, name, owner, args)
		VALUES ('clickhouse', 'handwritten', 'bob', '{"z": [1, 2.50, {"b": null, "a": true}], "big": 123456789012345678901234567890, "ratio": 1.50}')`)
	b.bulkInsert(t, storecopy.BatchSize+234)

	samples := []domain.CapacitySample{}
	for i, when := range []time.Time{at.Add(-time.Minute), at} {
		samples = append(samples,
			domain.CapacitySample{At: when, Provisioner: "pool", Unit: "slots", Total: 16, Used: int64(4 + i)},
			domain.CapacitySample{At: when, Provisioner: "pool", Host: "host-a", Unit: "slots", Total: 8, Used: 4},
			domain.CapacitySample{At: when, Provisioner: "pool", Host: "host-b", Unit: "slots", Total: 8, Used: int64(i), Down: i == 1})
	}
	session, err := b.RegisterAgent(ctx, domain.AgentInfo{ID: holder, Version: "test"})
	must("register", err)
	_, leads, err := b.ClaimLeadership(ctx, holder, session, time.Hour)
	if err != nil || !leads {
		t.Fatalf("claim leadership: %v (leads: %v)", err, leads)
	}
	term := domain.Term{Holder: holder, Session: session}
	must("record capacity", b.RecordCapacity(ctx, term, samples))
	_, err = b.SetCapacityWarning(ctx, term, domain.CapacityWarning{Provisioner: "pool", Kind: "total", Active: true, Message: "75% used", Since: at})
	must("warn", err)
	_, err = b.SetCapacityWarning(ctx, term, domain.CapacityWarning{Provisioner: "pool", Kind: "hosts", Active: false, Message: "", Since: at.Add(-time.Hour)})
	must("warn", err)
	_, err = b.ApplyProvisionerSpec(ctx, "pool", "sha256:pool-1")
	must("spec", err)
	_, err = b.ApplyProvisionerSpec(ctx, "k8s", "sha256:k8s-1")
	must("spec", err)

	b.exec(t, `DELETE FROM change_log WHERE seq = (SELECT max(seq) FROM change_log)`)
	b.exec(t, `DELETE FROM resource_events WHERE seq = (SELECT max(seq) FROM resource_events)`)
}

func ptr[T any](v T) *T { return &v }

// ownerPolicies are the policies populate sets.
var ownerPolicies = []domain.OwnerPolicy{
	{Owner: "alice", Weight: 3, Class: "batch"},
	{Owner: "bob", Weight: 1, Class: ""},
	{Owner: "carol", Weight: domain.MaxOwnerWeight, Class: "gold-1"},
}

// quotas are the quotas populate sets: alice's on pool is full with the four resources it
// admits there (ready, resized, unhealthy, deleting; 2 slots each); the others are a cap of
// 0 and caps left out (NULL).
var quotas = []domain.QuotaUsage{
	{Quota: domain.Quota{Owner: "alice", Provisioner: "k8s", MaxResources: ptr[int64](0)}},
	{Quota: domain.Quota{Owner: "alice", Provisioner: "pool", MaxResources: ptr[int64](4), MaxSlots: ptr[int64](16)}, Resources: 4, Slots: 8},
	{Quota: domain.Quota{Owner: "bob", Provisioner: "k8s", MaxSlots: ptr[int64](1 << 40)}},
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dump reads every row of a store, with times cut to the millisecond (SQLite's precision)
// and JSON in one form, each table sorted by its key.
func dump(t *testing.T, src storecopy.Source) storecopy.Batch {
	t.Helper()
	ctx := testContext(t)
	var all storecopy.Batch
	err := src.Export(ctx, func(v storecopy.View) error {
		return v.Read(ctx, func(b storecopy.Batch) error {
			all.Resources = append(all.Resources, b.Resources...)
			all.Reservations = append(all.Reservations, b.Reservations...)
			all.Events = append(all.Events, b.Events...)
			all.Changes = append(all.Changes, b.Changes...)
			all.CapacitySamples = append(all.CapacitySamples, b.CapacitySamples...)
			all.CapacityWarnings = append(all.CapacityWarnings, b.CapacityWarnings...)
			all.ProvisionerSpecs = append(all.ProvisionerSpecs, b.ProvisionerSpecs...)
			all.OwnerPolicies = append(all.OwnerPolicies, b.OwnerPolicies...)
			all.OwnerQuotas = append(all.OwnerQuotas, b.OwnerQuotas...)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range all.Resources {
		r := &all.Resources[i]
		r.Args, r.State, r.Config, r.Labels = canonical(t, r.Args), canonical(t, r.State), canonical(t, r.Config), canonical(t, r.Labels)
		r.CreatedAt, r.UpdatedAt, r.StatusChangedAt = ms(r.CreatedAt), ms(r.UpdatedAt), ms(r.StatusChangedAt)
		r.NextAttemptAt, r.LeaseExpiresAt, r.ReadyAt, r.UnhealthySince = msp(r.NextAttemptAt), msp(r.LeaseExpiresAt), msp(r.ReadyAt), msp(r.UnhealthySince)
		r.RetryRequestedAt, r.WaitingSince, r.LastAttemptAt = msp(r.RetryRequestedAt), msp(r.WaitingSince), msp(r.LastAttemptAt)
	}
	sort.Slice(all.Resources, func(i, j int) bool { return all.Resources[i].ID < all.Resources[j].ID })
	for i := range all.Reservations {
		r := &all.Reservations[i]
		r.CreatedAt, r.UpdatedAt = ms(r.CreatedAt), ms(r.UpdatedAt)
	}
	sort.Slice(all.Reservations, func(i, j int) bool {
		a, b := all.Reservations[i], all.Reservations[j]
		return a.Provisioner+"\x00"+a.ResourceID < b.Provisioner+"\x00"+b.ResourceID
	})
	for i := range all.Events {
		all.Events[i].At = ms(all.Events[i].At)
	}
	for i := range all.Changes {
		all.Changes[i].CreatedAt = ms(all.Changes[i].CreatedAt)
	}
	for i := range all.CapacitySamples {
		all.CapacitySamples[i].At = ms(all.CapacitySamples[i].At)
	}
	sort.Slice(all.CapacitySamples, func(i, j int) bool {
		a, b := all.CapacitySamples[i], all.CapacitySamples[j]
		return fmt.Sprint(a.Provisioner, "\x00", a.Host, "\x00", a.At.UnixMilli()) < fmt.Sprint(b.Provisioner, "\x00", b.Host, "\x00", b.At.UnixMilli())
	})
	for i := range all.CapacityWarnings {
		w := &all.CapacityWarnings[i]
		w.Since, w.UpdatedAt = ms(w.Since), ms(w.UpdatedAt)
	}
	sort.Slice(all.CapacityWarnings, func(i, j int) bool {
		a, b := all.CapacityWarnings[i], all.CapacityWarnings[j]
		return a.Provisioner+"\x00"+a.Kind < b.Provisioner+"\x00"+b.Kind
	})
	for i := range all.ProvisionerSpecs {
		all.ProvisionerSpecs[i].AppliedAt = ms(all.ProvisionerSpecs[i].AppliedAt)
	}
	sort.Slice(all.ProvisionerSpecs, func(i, j int) bool {
		return all.ProvisionerSpecs[i].Provisioner < all.ProvisionerSpecs[j].Provisioner
	})
	for i := range all.OwnerPolicies {
		all.OwnerPolicies[i].UpdatedAt = ms(all.OwnerPolicies[i].UpdatedAt)
	}
	sort.Slice(all.OwnerPolicies, func(i, j int) bool { return all.OwnerPolicies[i].Owner < all.OwnerPolicies[j].Owner })
	for i := range all.OwnerQuotas {
		all.OwnerQuotas[i].UpdatedAt = ms(all.OwnerQuotas[i].UpdatedAt)
	}
	sort.Slice(all.OwnerQuotas, func(i, j int) bool {
		a, b := all.OwnerQuotas[i], all.OwnerQuotas[j]
		return a.Owner+"\x00"+a.Provisioner < b.Owner+"\x00"+b.Provisioner
	})
	return all
}

func canonical(t *testing.T, text string) string {
	t.Helper()
	c, err := storecopy.CanonicalJSON(text)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func msp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := ms(*t)
	return &v
}

// sameRows fails the test, naming the table and the first row that differs, unless a and
// b hold the same rows field by field.
func sameRows(t *testing.T, what string, a, b storecopy.Batch) {
	t.Helper()
	tables := []struct {
		table storecopy.Table
		a, b  any
	}{
		{storecopy.Resources, a.Resources, b.Resources},
		{storecopy.Reservations, a.Reservations, b.Reservations},
		{storecopy.Events, a.Events, b.Events},
		{storecopy.Changes, a.Changes, b.Changes},
		{storecopy.CapacitySamples, a.CapacitySamples, b.CapacitySamples},
		{storecopy.CapacityWarnings, a.CapacityWarnings, b.CapacityWarnings},
		{storecopy.ProvisionerSpecs, a.ProvisionerSpecs, b.ProvisionerSpecs},
		{storecopy.OwnerPolicies, a.OwnerPolicies, b.OwnerPolicies},
		{storecopy.OwnerQuotas, a.OwnerQuotas, b.OwnerQuotas},
	}
	for _, tc := range tables {
		va, vb := reflect.ValueOf(tc.a), reflect.ValueOf(tc.b)
		if va.Len() != vb.Len() {
			t.Errorf("%s: %s has %d rows and %d", what, tc.table, va.Len(), vb.Len())
			continue
		}
		for i := 0; i < va.Len(); i++ {
			ra, rb := va.Index(i).Interface(), vb.Index(i).Interface()
			if !reflect.DeepEqual(ra, rb) {
				ja, _ := json.Marshal(ra)
				jb, _ := json.Marshal(rb)
				t.Errorf("%s: %s row %d differs:\n%s\n%s", what, tc.table, i, ja, jb)
				break
			}
		}
	}
}

func mustCopy(t *testing.T, from storecopy.Source, to storecopy.Target) storecopy.Report {
	t.Helper()
	report, err := storecopy.Copy(testContext(t), from, to, storecopy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return report
}

func counts(t *testing.T, src storecopy.Source) storecopy.Counts {
	t.Helper()
	ctx := testContext(t)
	var c storecopy.Counts
	if err := src.Export(ctx, func(v storecopy.View) (err error) {
		c, err = v.Count(ctx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

func positions(t *testing.T, src storecopy.Source) storecopy.Positions {
	t.Helper()
	ctx := testContext(t)
	var p storecopy.Positions
	if err := src.Export(ctx, func(v storecopy.View) (err error) {
		p, err = v.Positions(ctx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRoundTrip copies a PostgreSQL store into SQLite and back into another PostgreSQL
// database: all three hold the same rows, field by field, read raw and through the store's
// API, and both copies go on behaving as their store does.
func TestRoundTrip(t *testing.T) {
	pg1, lite, pg2 := newPostgres(t), newSQLite(t), newPostgres(t)
	populate(t, pg1)
	want := dump(t, pg1)
	for status := range map[string]bool{"pending": true, "provisioning": true, "ready": true, "unhealthy": true, "error": true, "deleting": true} {
		found := false
		for _, r := range want.Resources {
			found = found || r.Status == status
		}
		if !found {
			t.Fatalf("populate left no resource %s", status)
		}
	}
	admitted := 0
	for _, r := range want.Resources {
		if r.AdmittedProvisioner != nil && r.AdmittedUnits != nil {
			admitted++
		}
	}
	if admitted != 4 || len(want.OwnerPolicies) != len(ownerPolicies) || len(want.OwnerQuotas) != len(quotas) {
		t.Fatalf("populate left %d admissions, %d owner policies, %d quotas; want 4, %d, %d",
			admitted, len(want.OwnerPolicies), len(want.OwnerQuotas), len(ownerPolicies), len(quotas))
	}
	srcCounts, srcPositions := counts(t, pg1), positions(t, pg1)

	toSQLite := mustCopy(t, pg1, lite)
	toPostgres := mustCopy(t, lite, pg2)

	sameRows(t, "PostgreSQL -> SQLite", want, dump(t, lite))
	sameRows(t, "SQLite -> PostgreSQL", want, dump(t, pg2))
	for i, tr := range toSQLite.Tables {
		if tr.Rows != srcCounts[tr.Table] || toPostgres.Tables[i] != tr {
			t.Errorf("reported %s: %+v then %+v; want %d rows and the same checksum", tr.Table, tr, toPostgres.Tables[i], srcCounts[tr.Table])
		}
	}
	if srcPositions.ChangeLog <= int64(len(want.Changes)) || srcPositions.Events <= want.Events[len(want.Events)-1].Seq {
		t.Fatalf("source positions %+v: populate should leave them above the rows", srcPositions)
	}
	for _, b := range []*backend{lite, pg2} {
		if got := positions(t, b); got != srcPositions {
			t.Errorf("%s positions %+v; want %+v", b.kind, got, srcPositions)
		}
	}
	sameAPIView(t, pg1, lite)
	sameAPIView(t, pg1, pg2)
	for _, b := range []*backend{lite, pg2} {
		t.Run(string(b.kind)+" behaves after the copy", func(t *testing.T) { behavesAfterCopy(t, b, srcPositions) })
		t.Run(string(b.kind)+" keeps owner policies, quotas and admissions", func(t *testing.T) { keepsOwnerLimits(t, b) })
	}
}

// keepsOwnerLimits checks a copy holds populate's owner policies and quotas as they were set,
// and the admissions as usage that still counts: alice's quota on pool, full before the copy,
// refuses her next resource there.
func keepsOwnerLimits(t *testing.T, b *backend) {
	ctx := testContext(t)
	policies, err := b.ListOwnerPolicies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range policies {
		policies[i].UpdatedAt = time.Time{}
	}
	if !reflect.DeepEqual(policies, ownerPolicies) {
		t.Errorf("owner policies %+v; want %+v", policies, ownerPolicies)
	}
	got, err := b.ListQuotas(ctx, domain.QuotaFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i].UpdatedAt = time.Time{}
	}
	if !reflect.DeepEqual(got, quotas) {
		ja, _ := json.Marshal(got)
		jb, _ := json.Marshal(quotas)
		t.Errorf("quotas with their usage:\n%s\nwant\n%s", ja, jb)
	}
	r, err := b.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "over-quota", Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.ClaimResource(ctx, r.ID, "agent-b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.AdmitResource(ctx, r.ID, c.Lease, domain.Admission{Provisioner: "pool", Units: 2})
	var exceeded *domain.QuotaExceededError
	if !errors.As(err, &exceeded) || exceeded.Resources != 4 || exceeded.Slots != 8 {
		t.Errorf("admit a fifth resource of alice on pool: %v; want the quota exceeded at 4 resources, 8 slots", err)
	}
}

// sameAPIView compares what the store's API shows of both stores, times to the millisecond.
func sameAPIView(t *testing.T, a, b *backend) {
	t.Helper()
	ctx := testContext(t)
	read := func(st *backend) map[string]any {
		rs, err := st.ListResources(ctx, domain.ListFilter{})
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].ID < rs[j].ID })
		events := map[string][]domain.Event{}
		for i := range rs {
			r := &rs[i]
			r.CreatedAt, r.UpdatedAt, r.StatusChangedAt = ms(r.CreatedAt), ms(r.UpdatedAt), ms(r.StatusChangedAt)
			r.NextAttemptAt, r.ReadyAt, r.UnhealthySince = msp(r.NextAttemptAt), msp(r.ReadyAt), msp(r.UnhealthySince)
			r.RetryRequestedAt, r.LeaseExpiresAt = msp(r.RetryRequestedAt), msp(r.LeaseExpiresAt)
			r.WaitingSince, r.LastAttemptAt = msp(r.WaitingSince), msp(r.LastAttemptAt)
			es, err := st.ListEvents(ctx, r.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			for j := range es {
				es[j].At = ms(es[j].At)
			}
			if len(es) > 0 { // one backend says none with nil, the other with an empty slice
				events[r.ID] = es
			}
		}
		reservations, err := st.ListReservations(ctx, "pool")
		if err != nil {
			t.Fatal(err)
		}
		latest, err := st.LatestCapacity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range latest {
			latest[i].At = ms(latest[i].At)
		}
		warnings, err := st.ListCapacityWarnings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range warnings {
			warnings[i].Since = ms(warnings[i].Since)
		}
		changes, err := st.ChangesAfter(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		byStatus, err := st.CountResourcesByStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		policies, err := st.ListOwnerPolicies(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range policies {
			policies[i].UpdatedAt = ms(policies[i].UpdatedAt)
		}
		quotas, err := st.ListQuotas(ctx, domain.QuotaFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range quotas {
			quotas[i].UpdatedAt = ms(quotas[i].UpdatedAt)
		}
		owners, err := st.OwnerSummaries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range owners {
			owners[i].UpdatedAt = ms(owners[i].UpdatedAt)
		}
		return map[string]any{"resources": rs, "events": events, "reservations": reservations, "capacity": latest,
			"warnings": warnings, "changes": changes, "statuses": byStatus, "slot usage": slotUsage(t, st, "pool", "alice"),
			"owner policies": policies, "quotas": quotas, "owners": owners}
	}
	va, vb := read(a), read(b)
	for _, k := range sortedKeys(va) {
		if !reflect.DeepEqual(va[k], vb[k]) {
			ja, _ := json.Marshal(va[k])
			jb, _ := json.Marshal(vb[k])
			for i := range ja {
				if i >= len(jb) || ja[i] != jb[i] {
					ja, jb = ja[max(0, i-300):], jb[max(0, i-300):]
					break
				}
			}
			t.Errorf("%s and %s show different %s:\n%.2000s\n%.2000s", a.kind, b.kind, k, ja, jb)
		}
	}
}

// slotUsage is the usage ReserveSlots shows pick for a new resource of owner (the copy
// recomputes it from the reservations); it reserves nothing.
func slotUsage(t *testing.T, st *backend, provisioner, owner string) []domain.HostUsage {
	t.Helper()
	errProbe := errors.New("probe: reserve nothing")
	var seen []domain.HostUsage
	req := domain.SlotRequest{Provisioner: provisioner, ResourceID: "00000000-0000-4000-8000-000000000001", Owner: owner, Slots: 1, HostSlots: func(string) int { return math.MaxInt32 }}
	_, err := st.ReserveSlots(testContext(t), req, func(_ domain.SlotRequest, _ *domain.Reservation, usage []domain.HostUsage) (string, error) {
		seen = usage
		return "", errProbe
	})
	if !errors.Is(err, errProbe) {
		t.Fatalf("probe the slot usage: %v", err)
	}
	if len(seen) == 0 {
		t.Fatalf("%s shows no slot usage of %s: the copied store holds reservations", st.kind, provisioner)
	}
	return seen
}

// behavesAfterCopy checks the copy's triggers and sequences work: new entries come after the
// copied positions, a plain SQL args change bumps the generation, a plain DELETE is a delete
// request.
func behavesAfterCopy(t *testing.T, b *backend, copied storecopy.Positions) {
	ctx := testContext(t)
	r, err := b.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "after-copy", Owner: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	changes, err := b.ChangesAfter(ctx, copied.ChangeLog, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].ResourceID != r.ID || changes[0].Seq != copied.ChangeLog+1 {
		t.Errorf("changes after the copied position %d: %+v; want the new resource's, at %d", copied.ChangeLog, changes, copied.ChangeLog+1)
	}
	events, err := b.ListEvents(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Seq != copied.Events+1 {
		t.Errorf("events of the new resource: %+v; want one, at %d", events, copied.Events+1)
	}
	b.exec(t, `UPDATE resources SET args = '{"slots": 3}' WHERE id = $1`, r.ID)
	b.exec(t, `DELETE FROM resources WHERE id = $1`, r.ID)
	got, err := b.GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 2 || got.Status != domain.StatusDeleting {
		t.Errorf("after an SQL args change and DELETE: generation %d, status %s; want 2, deleting", got.Generation, got.Status)
	}
}

// A target holding anything is refused and left alone.
func TestRefusesANonEmptyTarget(t *testing.T) {
	src := newPostgres(t)
	populate(t, src)
	for name, target := range map[string]*backend{"postgres": newPostgres(t), "sqlite": newSQLite(t)} {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			if _, err := target.ApplyProvisionerSpec(ctx, "pool", "sha256:other"); err != nil {
				t.Fatal(err)
			}
			before := dump(t, target)
			_, err := storecopy.Copy(ctx, src, target, storecopy.Options{})
			var notEmpty *storecopy.NotEmptyError
			if !errors.As(err, &notEmpty) || !strings.Contains(err.Error(), "1 provisioner_specs") {
				t.Fatalf("copy into a target with a spec: %v; want a NotEmptyError naming it", err)
			}
			sameRows(t, "the refused target", before, dump(t, target))
		})
	}
}

var errBroken = errors.New("the source broke")

// brokenSource fails its Read once it has handed over the first batch of a table.
type brokenSource struct {
	storecopy.Source
	after storecopy.Table
}

func (s brokenSource) Export(ctx context.Context, f func(storecopy.View) error) error {
	return s.Source.Export(ctx, func(v storecopy.View) error { return f(brokenView{View: v, after: s.after}) })
}

type brokenView struct {
	storecopy.View
	after storecopy.Table
}

func (v brokenView) Read(ctx context.Context, emit func(storecopy.Batch) error) error {
	return v.View.Read(ctx, func(b storecopy.Batch) error {
		if err := emit(b); err != nil {
			return err
		}
		if b.Table() == v.after {
			return errBroken
		}
		return nil
	})
}

// tamperingTarget changes what it is given to write.
type tamperingTarget struct {
	storecopy.Target
	tamper func(*storecopy.Batch)
}

func (t tamperingTarget) Import(ctx context.Context, f func(storecopy.Importer) error) error {
	return t.Target.Import(ctx, func(im storecopy.Importer) error { return f(tamperingImporter{Importer: im, tamper: t.tamper}) })
}

type tamperingImporter struct {
	storecopy.Importer
	tamper func(*storecopy.Batch)
}

func (im tamperingImporter) Write(ctx context.Context, b storecopy.Batch) error {
	im.tamper(&b)
	return im.Importer.Write(ctx, b)
}

// A copy that fails half way, or whose result does not verify, leaves the target empty,
// with its triggers and sequences as they were.
func TestAFailedCopyLeavesTheTargetEmpty(t *testing.T) {
	src := newSQLite(t)
	populate(t, src)
	dropFirst := func(b *storecopy.Batch) {
		if len(b.Events) > 0 {
			b.Events = b.Events[1:]
		}
	}
	rename := func(b *storecopy.Batch) {
		if len(b.Resources) > 0 {
			b.Resources = append([]storecopy.Resource(nil), b.Resources...)
			b.Resources[0].StatusMessage += " (tampered)"
		}
	}
	for _, tc := range []struct {
		name   string
		from   storecopy.Source
		tamper func(*storecopy.Batch)
		want   string
	}{
		{"source fails after the first events", brokenSource{Source: src, after: storecopy.Events}, nil, errBroken.Error()},
		{"a lost event", src, dropFirst, "resource_events: the source has"},
		{"a changed resource", src, rename, "resources: the rows differ"},
	} {
		for name, newTarget := range map[string]func(*testing.T) *backend{"postgres": newPostgres, "sqlite": newSQLite} {
			t.Run(tc.name+" into "+name, func(t *testing.T) {
				ctx := testContext(t)
				target := newTarget(t)
				var to storecopy.Target = target
				if tc.tamper != nil {
					to = tamperingTarget{Target: target, tamper: tc.tamper}
				}
				_, err := storecopy.Copy(ctx, tc.from, to, storecopy.Options{})
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("copy: %v; want an error saying %q", err, tc.want)
				}
				if c := counts(t, target); !c.Empty() {
					t.Errorf("target after a failed copy: %v; want it empty", c)
				}
				if p := positions(t, target); p != (storecopy.Positions{}) {
					t.Errorf("target positions after a failed copy: %+v; want none", p)
				}
				behavesAfterCopy(t, target, storecopy.Positions{})
			})
		}
	}
}

// Both ends must be at this build's schema: a store never migrated is refused with what to
// run.
func TestRefusesAStoreWithoutTheSchema(t *testing.T) {
	migrated := newSQLite(t)
	for name, bare := range map[string]*backend{
		"postgres": openBackend(t, pgtest.New(t), false),
		"sqlite":   openBackend(t, "sqlite://"+filepath.Join(t.TempDir(), "bare.db"), false),
	} {
		ctx := testContext(t)
		if _, err := storecopy.Copy(ctx, bare, migrated, storecopy.Options{}); err == nil || !strings.Contains(err.Error(), "berth migrate") {
			t.Errorf("%s: copy from a database without the schema: %v; want it to say to run berth migrate", name, err)
		}
		if _, err := storecopy.Copy(ctx, migrated, bare, storecopy.Options{}); err == nil || !strings.Contains(err.Error(), "berth migrate") {
			t.Errorf("%s: copy into a database without the schema: %v; want it to say to run berth migrate", name, err)
		}
	}
}

// Progress counts each table's rows up to the source's count; live leases are reported by
// holder.
func TestProgressAndLeases(t *testing.T) {
	src, dst := newPostgres(t), newSQLite(t)
	populate(t, src)
	total := counts(t, src)
	last := storecopy.Counts{}
	report, err := storecopy.Copy(testContext(t), src, dst, storecopy.Options{
		Now: time.Now(),
		Progress: func(p storecopy.Progress) {
			if p.Total != total[p.Table] || p.Copied <= last[p.Table] || p.Copied > p.Total {
				t.Errorf("progress %+v after %d; want a rising count up to %d", p, last[p.Table], total[p.Table])
			}
			last[p.Table] = p.Copied
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range storecopy.AllTables {
		if last[table] != total[table] {
			t.Errorf("progress of %s ended at %d; want %d", table, last[table], total[table])
		}
	}
	if len(report.Leases) != 1 || report.Leases[0].Holder != "agent-a" || report.Leases[0].Resources != 1 {
		t.Errorf("leases %+v; want agent-a's one live lease (the provisioning resource)", report.Leases)
	}
}

// leftOut are the tables of the schema Copy does not copy, each with why (the package doc
// says the same): a table added to the schema must be copied or listed here.
var leftOut = map[string]string{
	"agents":             "membership is the running agents' own",
	"leadership":         "the leader's term is the running agents' own",
	"slot_host_usage":    "derived from the reservations; Import recomputes it",
	"slot_owner_usage":   "derived from the reservations; Import recomputes it",
	"schema_migrations":  "the target's own, written by berth migrate",
	"berth_owner_grants": "PostgreSQL's client roles' grants, set up on the target with berth access",
	"announce_channel":   "each PostgreSQL database's own secret, made by its migration",
	"broker_budgets":     "runtime state: a bucket starts full at its first draw",
	"broker_breakers":    "runtime state: a breaker starts closed",
	"write_intents":      "SQLite's stand-in for a transaction's settings, empty between writes",
	"sqlite_sequence":    "SQLite's own; SetPositions writes it",
}

// schemaColumns lists the migrated schema's tables with their columns, sorted.
func (b *backend) schemaColumns(t *testing.T) map[string][]string {
	t.Helper()
	ctx := testContext(t)
	out := map[string][]string{}
	add := func(table, column string) { out[table] = append(out[table], column) }
	switch st := b.DB.(type) {
	case *postgres.State:
		rows, err := st.Pool().Query(ctx, `
			SELECT c.table_name, c.column_name FROM information_schema.columns c
			  JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
			 WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var table, column string
			if err := rows.Scan(&table, &column); err != nil {
				t.Fatal(err)
			}
			add(table, column)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	case *sqlite.State:
		rows, err := st.DB().QueryContext(ctx, `
			SELECT s.name, c.name FROM sqlite_schema s, pragma_table_info(s.name) c WHERE s.type = 'table'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var table, column string
			if err := rows.Scan(&table, &column); err != nil {
				t.Fatal(err)
			}
			add(table, column)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("no schema listing for %T", b.DB)
	}
	for table := range out {
		sort.Strings(out[table])
	}
	return out
}

// Every table of the migrated schema, on both stores, is copied with exactly its columns, or
// left out on purpose: a migration that adds a table or a column fails here until the copy
// carries it (or leftOut says why not).
func TestEveryTableAndColumnIsCopiedOrLeftOutOnPurpose(t *testing.T) {
	copied := map[string]bool{}
	for _, table := range storecopy.AllTables {
		copied[string(table)] = true
	}
	for name, b := range map[string]*backend{"postgres": newPostgres(t), "sqlite": newSQLite(t)} {
		schema := b.schemaColumns(t)
		for _, table := range sortedKeys(schema) {
			if _, ok := leftOut[table]; !ok && !copied[table] {
				t.Errorf("%s: table %s is neither copied (storecopy.AllTables) nor left out on purpose", name, table)
			}
		}
		for _, table := range storecopy.AllTables {
			want := append([]string(nil), table.Columns()...)
			sort.Strings(want)
			if got := schema[string(table)]; !reflect.DeepEqual(got, want) {
				t.Errorf("%s: table %s has columns %v; the copy carries %v", name, table, got, want)
			}
		}
	}
}
