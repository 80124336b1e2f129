package e2e_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestClientRoleContract runs the agent with the role that owns Berth's tables and a client
// with a role `berth migrate --client-role` set up, both through the real binary: what a
// client does works end to end, and every forgery of the agent's state is refused naming
// the column while the agent goes on. With owner isolation on, a client of one owner
// cannot see, update or delete another owner's rows.
func TestClientRoleContract(t *testing.T) {
	e := newEnv(t, map[string]int{"a": 4})
	ctx := context.Background()
	roleA, urlA := e.loginRole("app_a")
	roleB, urlB := e.loginRole("app_b")
	for _, role := range []string{roleA, roleB} {
		out := e.berth("migrate", "--client-role", role)
		if !strings.Contains(out, "role "+role+" has a client's rights") {
			t.Fatalf("migrate --client-role %s: %q", role, out)
		}
	}
	if out := e.berth("doctor", "--database-url", urlA); !strings.Contains(out, "acts as:         client") {
		t.Fatalf("doctor as the client:\n%s", out)
	}
	a := e.startAgent()

	asA := func(args ...string) string {
		t.Helper()
		return e.berth(append(args, "--database-url", urlA)...)
	}
	created := asA("resource", "create", "--type", "runtime", "--name", "web", "--owner", "team-a", "--arg", "slots=1", "--wait")
	lines := strings.Split(strings.TrimSpace(created), "\n")
	id := lines[len(lines)-1]
	if r := e.get(id); r.Status != "ready" {
		t.Fatalf("created by the client: %+v", r)
	}
	asA("resource", "label", id, "tier=web")
	asA("resource", "update", id, "--arg", "slots=2", "--wait")
	asA("resource", "hibernate", id)
	e.eventually("the client's hibernate is carried out", 20*time.Second, func() (bool, string) {
		r := e.get(id)
		return r.Status == "hibernated", r.Status
	})
	asA("resource", "wake", id)
	e.eventually("the client's wake is carried out", 20*time.Second, func() (bool, string) {
		r := e.get(id)
		return r.Status == "ready", r.Status
	})
	asA("resource", "pause", id)
	asA("resource", "resume", id)
	asA("resource", "retry", id)

	client, err := pgxpool.New(ctx, urlA)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, forgery := range []struct{ sql, names string }{
		{`UPDATE resources SET status = 'error', status_message = 'forged' WHERE id = $1`, `column "status"`},
		{`UPDATE resources SET lease_holder = 'evil', lease_expires_at = now() + interval '10 years' WHERE id = $1`, `column "lease_holder"`},
		{`UPDATE resources SET config = '{"host": "http://evil"}' WHERE id = $1`, `column "config"`},
		{`INSERT INTO resource_events (resource_id, kind, status, message) VALUES ($1, 'status', 'ready', 'forged')`, `permission denied for table resource_events`},
	} {
		if _, err := client.Exec(ctx, forgery.sql, id); err == nil || !strings.Contains(err.Error(), forgery.names) {
			t.Fatalf("%s as a client: %v, want it refused naming %s", forgery.sql, err, forgery.names)
		}
	}
	err = pgx.BeginFunc(ctx, client, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL berth.finalizing = 'on'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM resources WHERE id = $1`, id)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "only the Berth agent removes") {
		t.Fatalf("a client's finalizing delete: %v, want it refused", err)
	}

	// Owner isolation: B's row is out of A's sight and reach.
	e.berth("access", "grant", roleA, "team-a")
	e.berth("access", "grant", roleB, "team-b")
	e.berth("access", "isolation", "on")
	other := e.berth("resource", "create", "--type", "runtime", "--name", "db", "--owner", "team-b", "--arg", "slots=1", "--database-url", urlB)
	otherLines := strings.Split(strings.TrimSpace(other), "\n")
	otherID := otherLines[len(otherLines)-1]
	if _, stderr, err := e.tryBerth("resource", "get", otherID, "--database-url", urlA); err == nil || !strings.Contains(stderr, "not found") {
		t.Fatalf("client A reads B's resource: %v %s", err, stderr)
	}
	if _, stderr, err := e.tryBerth("resource", "delete", otherID, "--database-url", urlA); err == nil {
		t.Fatalf("client A deletes B's resource: no error (%s)", stderr)
	}
	if tag, err := client.Exec(ctx, `DELETE FROM resources WHERE owner = 'team-b'`); err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("client A's SQL delete of B's rows: %v, %v", tag, err)
	}
	if _, stderr, err := e.tryBerth("resource", "create", "--type", "runtime", "--name", "x", "--owner", "team-b", "--database-url", urlA); err == nil || !strings.Contains(stderr, "row-level security") {
		t.Fatalf("client A creates for B: %v %s", err, stderr)
	}
	e.eventually("B's resource is made ready by the agent", 20*time.Second, func() (bool, string) {
		r := e.get(otherID)
		return r.Status == "ready", r.Status
	})

	// The client deletes its own resource; the agent frees it and removes the row.
	asA("resource", "delete", id, "--wait")
	e.eventually("the client's resource is gone with its reservation", 20*time.Second, func() (bool, string) {
		rows := e.queryInt("SELECT count(*) FROM resources WHERE id = $1", id)
		held := e.queryInt("SELECT count(*) FROM slot_reservations WHERE resource_id = $1", id)
		return rows == 0 && held == 0, fmt.Sprintf("rows=%d reservations=%d", rows, held)
	})
	a.stop(t)
}

// loginRole creates a login role for the test (roles belong to the server, so the name is
// made unique) and returns it with the test database's URL as that role. It is dropped when
// the test ends.
func (e *env) loginRole(prefix string) (string, string) {
	e.t.Helper()
	role := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE ROLE `+role+` LOGIN`); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_, _ = e.pool.Exec(ctx, `DROP OWNED BY `+role)
		_, _ = e.pool.Exec(ctx, `DROP ROLE `+role)
	})
	u, err := url.Parse(e.dbURL)
	if err != nil {
		e.t.Fatal(err)
	}
	u.User = url.User(role)
	return role, u.String()
}
