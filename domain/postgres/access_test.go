package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/internal/pgtest"
)

var roleSeq atomic.Int64

// clientRole creates a login role of the test's own (roles are the server's, not the
// database's) and returns its name and the URL of dbURL's database as that role. The role
// is dropped when the test ends, before its database.
func clientRole(t *testing.T, st *postgres.State, dbURL string) (string, string) {
	t.Helper()
	role := fmt.Sprintf("berth_client_%d_%d", time.Now().UnixNano()%1_000_000, roleSeq.Add(1))
	mustExec(t, st, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = st.Pool().Exec(ctx, `DROP OWNED BY `+role)
		_, _ = st.Pool().Exec(ctx, `DROP ROLE `+role)
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return role, u.String()
}

func openAs(t *testing.T, dbURL string) *postgres.State {
	t.Helper()
	st, err := postgres.Open(testContext(t), dbURL, postgres.PoolConfig{})
	if err != nil {
		t.Fatalf("open as client: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

func migratedAt(t *testing.T) (*postgres.State, string) {
	t.Helper()
	dbURL := pgtest.New(t)
	st := openAs(t, dbURL)
	if err := st.Migrate(testContext(t)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st, dbURL
}

// withClient returns a migrated database's agent store, and a store on it as a new role
// granted the client role.
func withClient(t *testing.T) (agent, client *postgres.State, role string) {
	t.Helper()
	agent, dbURL := migratedAt(t)
	role, clientURL := clientRole(t, agent, dbURL)
	if err := agent.GrantClientRole(testContext(t), role); err != nil {
		t.Fatalf("grant client role: %v", err)
	}
	return agent, openAs(t, clientURL), role
}

// wantForbidden checks err is a refusal of the role naming what.
func wantForbidden(t *testing.T, what string, err error, names string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s as a client: no error, want it refused", what)
	}
	if !strings.Contains(err.Error(), names) {
		t.Fatalf("%s as a client: %v, want an error naming %s", what, err, names)
	}
}

func TestClientRoleWritesTheClientColumnsOnly(t *testing.T) {
	ctx := testContext(t)
	agent, dbURL := migratedAt(t)
	role, clientURL := clientRole(t, agent, dbURL)
	for range 2 { // idempotent
		if err := agent.GrantClientRole(ctx, role); err != nil {
			t.Fatalf("grant client role: %v", err)
		}
	}
	client := openAs(t, clientURL)
	if err := client.Migrate(ctx); !errors.Is(err, domain.ErrForbidden) || !strings.Contains(err.Error(), "need the agent's role") {
		t.Fatalf("migrate as a client: %v, want it refused as the agent's work", err)
	}

	// What a client does works.
	r, err := client.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "alice", Args: map[string]any{"slots": 1}, Labels: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatalf("create as a client: %v", err)
	}
	if r, err = client.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2}); err != nil || r.Generation != 2 {
		t.Fatalf("update args as a client: generation %d, %v", r.Generation, err)
	}
	for _, control := range []struct {
		what string
		do   func() (domain.Resource, error)
	}{
		{"pause", func() (domain.Resource, error) { return client.SetPaused(ctx, r.ID, true) }},
		{"resume", func() (domain.Resource, error) { return client.SetPaused(ctx, r.ID, false) }},
		{"hibernate", func() (domain.Resource, error) { return client.SetHibernate(ctx, r.ID, true) }},
		{"wake", func() (domain.Resource, error) { return client.SetHibernate(ctx, r.ID, false) }},
		{"retry", func() (domain.Resource, error) { return client.RequestRetry(ctx, r.ID) }},
		{"label", func() (domain.Resource, error) { return client.SetLabels(ctx, r.ID, map[string]string{"team": "b"}) }},
	} {
		if _, err := control.do(); err != nil {
			t.Fatalf("%s as a client: %v", control.what, err)
		}
	}
	events, err := client.EventsAfter(ctx, 0, 0)
	if err != nil || len(events) != 7 { // created, then one control event each
		t.Fatalf("a client reads the history: %d events, %v", len(events), err)
	}

	// What only the agent writes is refused, naming the column.
	exec := func(sql string, args ...any) error {
		_, err := client.Pool().Exec(ctx, sql, args...)
		return err
	}
	for _, forgery := range []struct{ sql, names string }{
		{`UPDATE resources SET status = 'ready' WHERE id = $1`, `column "status"`},
		{`UPDATE resources SET lease_holder = 'evil', lease_expires_at = now() + interval '10 years' WHERE id = $1`, `column "lease_holder"`},
		{`UPDATE resources SET state = '{"host": "elsewhere"}' WHERE id = $1`, `column "state"`},
		{`UPDATE resources SET observed_generation = generation WHERE id = $1`, `column "observed_generation"`},
		{`UPDATE resources SET owner = 'bob' WHERE id = $1`, `column "owner"`},
		{`UPDATE resources SET next_attempt_at = now() + interval '1 day' WHERE id = $1`, `column "next_attempt_at"`},
		{`INSERT INTO resource_events (resource_id, kind, status, message) VALUES ($1, 'status', 'ready', 'forged')`, `permission denied for table resource_events`},
		{`INSERT INTO change_log (resource_id) VALUES ($1)`, `permission denied for table change_log`},
	} {
		wantForbidden(t, forgery.sql, exec(forgery.sql, r.ID), forgery.names)
	}
	_, err = client.Pool().Exec(ctx, `INSERT INTO resources (type, name, owner, status, config) VALUES ('runtime', 'forged', 'alice', 'ready', '{"url": "x"}')`)
	wantForbidden(t, "insert a ready row", err, `column "status"`)

	// The finalize path is the agent's: a client's finalizing DELETE is refused, and its
	// plain DELETE is a delete request.
	err = pgx.BeginFunc(ctx, client.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL berth.finalizing = 'on'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM resources WHERE id = $1`, r.ID)
		return err
	})
	wantForbidden(t, "a finalizing delete", err, "only the Berth agent removes a resource")
	if err := exec(`DELETE FROM resources WHERE id = $1`, r.ID); err != nil {
		t.Fatalf("delete as a client: %v", err)
	}
	got, err := client.GetResource(ctx, r.ID)
	if err != nil || got.Status != domain.StatusDeleting {
		t.Fatalf("after a client's delete: %s, %v; want deleting", got.Status, err)
	}
	// Nobody cancels a delete by rewriting the status, the agent included.
	for _, st := range []*postgres.State{client, agent} {
		_, err = st.Pool().Exec(ctx, `UPDATE resources SET status = 'ready' WHERE id = $1`, r.ID)
		wantForbidden(t, "moving a deleting row to ready", err, "is being deleted")
	}

	access, err := client.Access(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if access.Role != role || access.Agent || !access.Read || !access.Create || !access.Update || !access.Delete || !access.ReadEvents || access.OwnerIsolation {
		t.Fatalf("client access = %+v", access)
	}
	if access, err = agent.Access(ctx); err != nil || !access.Agent {
		t.Fatalf("agent access = %+v, %v", access, err)
	}
}

func TestGrantClientRoleRefusesWhatCannotBeAClient(t *testing.T) {
	ctx := testContext(t)
	agent, _ := migratedAt(t)
	err := agent.GrantClientRole(ctx, "berth_no_such_role")
	if !errors.Is(err, domain.ErrNotFound) || !strings.Contains(err.Error(), "CREATE ROLE") {
		t.Fatalf("grant to a missing role: %v, want not found saying how to create it", err)
	}
	var self string
	if err := agent.Pool().QueryRow(ctx, `SELECT current_user`).Scan(&self); err != nil {
		t.Fatal(err)
	}
	if err := agent.GrantClientRole(ctx, self); err == nil || !strings.Contains(err.Error(), "give clients a role of their own") {
		t.Fatalf("grant to the agent's own role: %v, want it refused", err)
	}
}

// The triggers tell the agent by its holding TRIGGER on resources with the grant option
// (migration 0026), which PostgreSQL gives the tables' owner and its members: a member
// writes the agent's columns, a NOINHERIT member and a plain role do not, and a client role
// the owner gave that grant option (which makes it the agent) loses it to GrantClientRole.
func TestTheAgentIsTheTablesOwnerOrAMemberOfIt(t *testing.T) {
	ctx := testContext(t)
	agent, dbURL := migratedAt(t)
	var owner string
	if err := agent.Pool().QueryRow(ctx, `SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'resources'::regclass`).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	r, err := agent.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	// writeStatus writes an agent column, a new value each time, as a role that may
	// otherwise update resources.
	writes := 0
	writeStatus := func(as *postgres.State) error {
		writes++
		_, err := as.Pool().Exec(ctx, `UPDATE resources SET status_message = format('write %s by %s', $2::int, current_user) WHERE id = $1`, r.ID, writes)
		return err
	}
	roleAs := func(grants ...string) (string, *postgres.State) {
		role, roleURL := clientRole(t, agent, dbURL)
		mustExec(t, agent, `GRANT USAGE ON SCHEMA public TO `+role)
		for _, g := range grants {
			mustExec(t, agent, strings.ReplaceAll(g, "$role", role))
		}
		return role, openAs(t, roleURL)
	}

	_, member := roleAs(`GRANT "` + owner + `" TO $role`)
	if err := writeStatus(member); err != nil {
		t.Fatalf("a member of the tables' owner writes an agent column: %v, want it accepted", err)
	}
	if a, err := member.Access(ctx); err != nil || !a.Agent {
		t.Fatalf("a member's access = %+v, %v; want it the agent", a, err)
	}

	_, noinherit := roleAs(`ALTER ROLE $role NOINHERIT`, `GRANT "`+owner+`" TO $role`, `GRANT SELECT, UPDATE ON resources TO $role`)
	wantForbidden(t, "a NOINHERIT member's write of an agent column", writeStatus(noinherit), `column "status_message"`)

	role, delegated := roleAs(`GRANT SELECT, UPDATE ON resources TO $role`, `GRANT TRIGGER ON resources TO $role WITH GRANT OPTION`)
	if err := writeStatus(delegated); err != nil {
		t.Fatalf("a role granted the owner's TRIGGER with grant option writes an agent column: %v, want it accepted as the agent's", err)
	}
	if err := agent.GrantClientRole(ctx, role); err != nil {
		t.Fatal(err)
	}
	wantForbidden(t, "the same role's write once granted the client role", writeStatus(delegated), `column "status_message"`)
	if a, err := delegated.Access(ctx); err != nil || a.Agent {
		t.Fatalf("its access once granted the client role = %+v, %v; want a client", a, err)
	}
}

func TestOwnerIsolationKeepsClientsToTheirOwners(t *testing.T) {
	ctx := testContext(t)
	agent, dbURL := migratedAt(t)
	roleA, urlA := clientRole(t, agent, dbURL)
	roleB, urlB := clientRole(t, agent, dbURL)
	for role, owner := range map[string]string{roleA: "team-a", roleB: "team-b"} {
		if err := agent.GrantClientRole(ctx, role); err != nil {
			t.Fatal(err)
		}
		if err := agent.GrantOwners(ctx, role, []string{owner}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := openAs(t, urlA), openAs(t, urlB)
	create := func(st *postgres.State, owner string) (domain.Resource, error) {
		return st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: owner, Args: map[string]any{"slots": 1}})
	}
	// Off by default: a client sees every owner's rows.
	rb, err := create(b, "team-b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetResource(ctx, rb.ID); err != nil {
		t.Fatalf("isolation off: a client reads another owner's row: %v", err)
	}

	if err := a.SetOwnerIsolation(ctx, true); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("a client turning isolation on: %v, want forbidden", err)
	}
	if err := agent.SetOwnerIsolation(ctx, true); err != nil {
		t.Fatal(err)
	}
	ra, err := create(a, "team-a")
	if err != nil {
		t.Fatalf("a client creates for its owner: %v", err)
	}
	if _, err := create(a, "team-b"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("a client creates for another owner: %v, want forbidden", err)
	}
	if _, err := a.GetResource(ctx, rb.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a client reads another owner's row: %v, want not found", err)
	}
	list, err := a.ListResources(ctx, domain.ListFilter{})
	if err != nil || len(list) != 1 || list[0].ID != ra.ID {
		t.Fatalf("a client lists %v, %v; want its own row only", list, err)
	}
	if _, err := a.SetPaused(ctx, rb.ID, true); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a client pauses another owner's row: %v, want not found", err)
	}
	if _, err := a.Pool().Exec(ctx, `DELETE FROM resources WHERE id = $1`, rb.ID); err != nil {
		t.Fatal(err)
	}
	events, err := a.EventsAfter(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.ResourceID != ra.ID {
			t.Fatalf("a client reads another owner's history: %+v", e)
		}
	}
	got, err := agent.GetResource(ctx, rb.ID)
	if err != nil || got.Status != domain.StatusPending || got.Paused {
		t.Fatalf("the other owner's row after the client's tries: %s paused=%v, %v; want it untouched", got.Status, got.Paused, err)
	}
	all, err := agent.ListResources(ctx, domain.ListFilter{})
	if err != nil || len(all) != 2 {
		t.Fatalf("the agent lists %d rows, %v; want every row", len(all), err)
	}
	access, err := a.Access(ctx)
	if err != nil || !access.OwnerIsolation || !slices.Equal(access.Owners, []string{"team-a"}) {
		t.Fatalf("client access = %+v, %v", access, err)
	}
	grants, err := agent.OwnerGrants(ctx)
	if err != nil || len(grants) != 2 {
		t.Fatalf("grants = %v, %v", grants, err)
	}
	if err := agent.RevokeOwners(ctx, roleA, []string{"team-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetResource(ctx, ra.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after its owner was revoked a client reads the row: %v", err)
	}
	if err := agent.SetOwnerIsolation(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetResource(ctx, rb.ID); err != nil {
		t.Fatalf("isolation off again: %v", err)
	}
}
