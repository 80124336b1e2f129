package postgres_test

import (
	"github.com/berth-dev/berth/internal/pgtest"
	"strings"
	"testing"
)

// The identity is the same for the agent's role and a client role on one database, survives
// another Migrate, and differs for another database.
func TestDatabaseIdentity(t *testing.T) {
	ctx := testContext(t)
	agent, dbURL := migratedAt(t)
	role, clientURL := clientRole(t, agent, dbURL)
	if err := agent.GrantClientRole(ctx, role); err != nil {
		t.Fatal(err)
	}
	id, err := agent.DatabaseIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(id.ID) != 16 || !strings.HasPrefix(id.Where, "PostgreSQL database ") || strings.Contains(id.Where, "@") {
		t.Errorf("identity %+v: want a 16-digit id and a place naming the database, with no user or password", id)
	}
	asClient, err := openAs(t, clientURL).DatabaseIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := agent.DatabaseIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if asClient != id || again != id {
		t.Errorf("identity as the agent %+v, as a client %+v, after Migrate %+v: want one", id, asClient, again)
	}
	other, _ := migratedAt(t)
	otherID, err := other.DatabaseIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if otherID.ID == id.ID {
		t.Errorf("two databases share the identity %s", id.ID)
	}
}

// A database never migrated has no identity: the error says what is missing.
func TestDatabaseIdentityNeedsTheSchema(t *testing.T) {
	_, err := openAs(t, pgtest.New(t)).DatabaseIdentity(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "schema_migrations") {
		t.Errorf("identity of an empty database: %v, want an error naming schema_migrations", err)
	}
}
