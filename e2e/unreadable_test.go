package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// TestUnreadableRows writes, with plain SQL, rows holding JSON the database accepts and Berth
// cannot decode: the agent goes on provisioning and checking the others, records the bad rows
// as errors saying which column is wrong, picks up fixes made with SQL, and deletes such a row
// on request.
func TestUnreadableRows(t *testing.T) { testUnreadableRows(t, e2etest.Postgres) }

// TestUnreadableRowsSQLite is TestUnreadableRows on the embedded store.
func TestUnreadableRowsSQLite(t *testing.T) { testUnreadableRows(t, e2etest.SQLite) }

func testUnreadableRows(t *testing.T, store e2etest.Store) {
	e := newEnvOn(t, store, map[string]int{"a": 8})
	a := e.startAgent()
	ctx := context.Background()

	badConfig := e.create("--name", "bad-config", "--owner", "team", "--wait")
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET config = '{"host": 1e400}' WHERE id = $1`, badConfig); err != nil {
		t.Fatal(err)
	}
	var badArgs string
	if err := e.SQL.QueryRowContext(ctx, `INSERT INTO resources (type, name, owner, args)
		VALUES ('runtime', 'bad-args', 'team', '{"slots": 1e400}') RETURNING CAST(id AS text)`).Scan(&badArgs); err != nil {
		t.Fatal(err)
	}

	// The others are provisioned and listed as before.
	after := e.create("--name", "after", "--owner", "team", "--wait")
	if r := e.get(after); r.Status != "ready" {
		t.Fatalf("a resource created after the bad rows: %v", r)
	}
	e.eventually("unreadable args become an error naming the column", 20*time.Second, func() (bool, string) {
		r := e.get(badArgs)
		return r.Status == "error" && strings.Contains(r.StatusMessage, "args is not JSON Berth can read: number 1e+400 out of range"), r.String()
	})
	e.eventually("the health checker records the ready row with unreadable config as an error", 20*time.Second, func() (bool, string) {
		r := e.get(badConfig)
		return r.Status == "error" && strings.Contains(r.StatusMessage, "config is not JSON Berth can read"), r.String()
	})
	list := e.berth("resource", "list")
	for _, want := range []string{"after", "error (unreadable)", "bad-args", "bad-config"} {
		if !strings.Contains(list, want) {
			t.Fatalf("list lacks %q:\n%s", want, list)
		}
	}
	e.eventually("the unreadable rows are looked at again", 20*time.Second, func() (bool, string) {
		n := e.queryInt(`SELECT count(*) FROM resources WHERE id IN ($1, $2) AND attempts >= 2`, badArgs, badConfig)
		return n == 2, e.statusCounts()
	})

	// Fixed with SQL: the config fix logs no change, the backed-off retry finds it.
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET config = '{}' WHERE id = $1`, badConfig); err != nil {
		t.Fatal(err)
	}
	e.eventually("the row with fixed config is ready again", 20*time.Second, func() (bool, string) {
		r := e.get(badConfig)
		return r.Status == "ready" && r.Config["host"] == e.hosts["a"].url && r.Unreadable == "", r.String()
	})
	e.berth("resource", "delete", badArgs, "--wait")
	if n := e.queryInt(`SELECT count(*) FROM resources WHERE id = $1`, badArgs); n != 0 {
		t.Fatalf("unreadable row still there after delete --wait")
	}
	e.assertNoOverfill()
	a.stop(t)
	if strings.Contains(a.Logs(), "panic") {
		t.Fatalf("agent panicked:\n%s", a.Logs())
	}
}
