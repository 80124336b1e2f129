package postgres_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain/postgres"
)

// The role's and the database's connection limits below what an agent may hold are named,
// with the statement that raises each; a superuser, whom the server exempts, has none.
func TestConnectionLimitsBelowNameTheRoleAndTheDatabase(t *testing.T) {
	ctx := testContext(t)
	st, dbURL := migratedAt(t)
	role, roleURL := clientRole(t, st, dbURL)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	database := strings.TrimPrefix(u.Path, "/")
	mustExec(t, st, `ALTER ROLE `+role+` CONNECTION LIMIT 3`)
	mustExec(t, st, `ALTER DATABASE "`+database+`" CONNECTION LIMIT 5`)

	client, err := postgres.Open(ctx, roleURL, postgres.PoolConfig{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if got := client.AgentConnections(); got != 6 {
		t.Fatalf("an agent with a pool of 4 holds %d connections, want 6", got)
	}
	below, err := client.ConnectionLimitsBelow(ctx, 6)
	if err != nil {
		t.Fatal(err)
	}
	want := []postgres.ConnectionLimit{{Of: "role", Name: role, Limit: 3}, {Of: "database", Name: database, Limit: 5}}
	if !slices.Equal(below, want) {
		t.Fatalf("limits below 6: %+v, want %+v", below, want)
	}
	if fix := below[0].Fix(6); fix != `ALTER ROLE "`+role+`" CONNECTION LIMIT 6` {
		t.Errorf("the role's fix: %q", fix)
	}
	if fix := below[1].Fix(6); fix != `ALTER DATABASE "`+database+`" CONNECTION LIMIT 6` {
		t.Errorf("the database's fix: %q", fix)
	}
	if below, err := client.ConnectionLimitsBelow(ctx, 3); err != nil || len(below) != 0 {
		t.Errorf("limits below 3: %+v, %v, want none: a limit of 3 holds 3", below, err)
	}
	if below, err := st.ConnectionLimitsBelow(ctx, 6); err != nil || len(below) != 0 {
		t.Errorf("a superuser's limits below 6: %+v, %v, want none", below, err)
	}
}
