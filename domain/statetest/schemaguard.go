package statetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// mustCheckSchema returns the versions of a schema the store's build knows.
func mustCheckSchema(t *testing.T, st domain.SchemaStore) domain.SchemaVersions {
	t.Helper()
	v, err := st.CheckSchema(testContext(t))
	if err != nil {
		t.Fatalf("check the schema: %v", err)
	}
	return v
}

// landNewerSchema records a migration one version above what the store's build knows, as a
// newer build's Migrate would, and returns the versions the store should now report.
func landNewerSchema(t *testing.T, b *Backend) domain.SchemaVersions {
	t.Helper()
	v := mustCheckSchema(t, b)
	if v.Known < 13 || v.Database != v.Known {
		t.Fatalf("versions before the newer schema: %+v; want the database at the build's own version (at least 13)", v)
	}
	newer := domain.SchemaVersions{Known: v.Known, Database: v.Known + 1}
	mustExec(t, b, `INSERT INTO schema_migrations (version) VALUES ($1)`, newer.Database)
	return newer
}

// expectSchemaTooNew fails unless err is the schema fence's, naming both versions and the fix.
func expectSchemaTooNew(t *testing.T, what string, err error, want domain.SchemaVersions) {
	t.Helper()
	var tooNew *domain.SchemaTooNewError
	if !errors.Is(err, domain.ErrSchemaTooNew) || !errors.As(err, &tooNew) || tooNew.Versions != want {
		t.Fatalf("%s: err = %v; want a schema too new error with versions %+v", what, err, want)
	}
	fix := fmt.Sprintf("replace this agent with a build that knows schema version %d", want.Database)
	if !strings.Contains(err.Error(), fix) {
		t.Fatalf("%s: err = %v; want it to say %q", what, err, fix)
	}
}

// Once a newer build's migration has landed, every write by which an agent decides what
// happens to a resource is refused in its own statement, whoever asks (another State on the
// database too), and changes nothing: a claim (plain, or one that starts provisioning), the
// progress and the finalized delete of an attempt claimed before, a leadership claim. Each
// says why, naming both versions. The membership stays, and shows the agent behind.
func testANewerSchemaFencesTheAgentsWrites(t *testing.T, b *Backend) {
	ctx := testContext(t)
	other := b.Reopen(t)
	session := mustRegister(t, b, "old")
	if got := mustListAgents(t, b)["old"].Schema; got != mustCheckSchema(t, b) {
		t.Fatalf("agent listed with schema %+v; want the build's and the database's %+v", got, mustCheckSchema(t, b))
	}
	working := mustCreate(t, b, runtime("working"))
	workingLease := mustClaim(t, b, working.ID, "old")
	deleting := mustCreate(t, b, runtime("deleting"))
	if _, err := b.RequestDelete(ctx, deleting.ID); err != nil {
		t.Fatal(err)
	}
	deletingLease := mustClaim(t, b, deleting.ID, "old")
	untouched := mustCreate(t, b, runtime("untouched"))

	newer := landNewerSchema(t, b)
	before := map[string]domain.Resource{}
	for _, id := range []string{working.ID, deleting.ID, untouched.ID} {
		before[id] = mustGet(t, b, id)
	}

	for name, st := range map[string]domain.State{"the store": b.State, "another State": other} {
		_, err := st.CheckSchema(ctx)
		expectSchemaTooNew(t, name+": check", err, newer)
		_, err = st.ClaimResource(ctx, untouched.ID, "old", ttl)
		expectSchemaTooNew(t, name+": claim", err, newer)
		_, err = st.ClaimAndStart(ctx, untouched.ID, "old", ttl, domain.ProvisioningStart{Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}})
		expectSchemaTooNew(t, name+": claim and start", err, newer)
		_, err = st.ClaimResource(ctx, working.ID, "old", ttl)
		expectSchemaTooNew(t, name+": renewing claim", err, newer)
		_, err = st.RecordProgress(ctx, working.ID, workingLease, domain.ProgressUpdate{Generation: working.Generation, Status: domain.StatusReady, Reason: domain.ReasonAvailable})
		expectSchemaTooNew(t, name+": progress", err, newer)
		err = st.FinalizeDelete(ctx, deleting.ID, deletingLease)
		expectSchemaTooNew(t, name+": finalize delete", err, newer)
		_, _, err = st.ClaimLeadership(ctx, "old", session, leadershipTTL)
		expectSchemaTooNew(t, name+": leadership claim", err, newer)
	}
	for id, was := range before {
		now := mustGet(t, b, id)
		if now.Status != was.Status || now.LeaseHolder != was.LeaseHolder || now.LeaseToken != was.LeaseToken || now.ObservedGeneration != was.ObservedGeneration {
			t.Errorf("resource %s changed under the newer schema: was %+v, now %+v", was.Name, was, now)
		}
	}
	if leaders := countRows(t, b, `SELECT count(*) FROM leadership`); leaders != 0 {
		t.Errorf("%d leadership rows after a refused claim; want none", leaders)
	}
	old := mustListAgents(t, b)["old"]
	if old.Schema != newer || !old.Schema.TooNew() {
		t.Errorf("agent listed with schema %+v; want %+v, too new for it", old.Schema, newer)
	}

	// The fence is the schema's alone: the same writes apply once it is gone.
	mustExec(t, b, `DELETE FROM schema_migrations WHERE version = $1`, newer.Database)
	if _, err := b.RecordProgress(ctx, working.ID, workingLease, domain.ProgressUpdate{Generation: working.Generation, Status: domain.StatusReady, Reason: domain.ReasonAvailable}); err != nil {
		t.Fatalf("progress without the newer schema: %v", err)
	}
	if err := b.FinalizeDelete(ctx, deleting.ID, deletingLease); err != nil {
		t.Fatalf("finalize delete without the newer schema: %v", err)
	}
	mustClaim(t, b, untouched.ID, "old")
	if _, mine := mustClaimLeadership(t, b, "old", session); !mine {
		t.Fatal("leadership claim without the newer schema: not the leader")
	}
}

// Migrate refuses a schema newer than its build knows: it applies nothing, not even a
// migration of its own the database lacks, and says why.
func testMigrateRefusesANewerSchema(t *testing.T, b *Backend) {
	migrator, ok := b.State.(interface{ Migrate(context.Context) error })
	if !ok {
		t.Fatalf("%T has no Migrate", b.State)
	}
	if err := migrator.Migrate(testContext(t)); err != nil {
		t.Fatalf("migrate an up-to-date schema again: %v", err)
	}
	newer := landNewerSchema(t, b)
	// The build's newest migration looks missing: a Migrate that ran anyway would apply it.
	mustExec(t, b, `DELETE FROM schema_migrations WHERE version = $1`, newer.Known)
	err := migrator.Migrate(testContext(t))
	expectSchemaTooNew(t, "migrate", err, newer)
	if n := countRows(t, b, `SELECT count(*) FROM schema_migrations WHERE version = $1`, newer.Known); n != 0 {
		t.Fatalf("migrate applied migration %d to a newer schema", newer.Known)
	}
}

func countRows(t *testing.T, b *Backend, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.QueryRow(testContext(t), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
