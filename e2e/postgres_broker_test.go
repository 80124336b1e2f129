package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berth-dev/berth/internal/e2etest"
	"github.com/berth-dev/berth/internal/pgtest"
)

// TestPostgresBrokerThroughTheAgent runs a provisioner set whose one provisioner is of
// type postgres, its admin DSN passed by reference in the environment: a database created
// through the CLI becomes ready with a config its role logs in with, is resized,
// repaired by the health check when its role is dropped out of band, hibernated and woken,
// and its delete leaves nothing on the server.
func TestPostgresBrokerThroughTheAgent(t *testing.T) {
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	prefix := "be" + hex.EncodeToString(suffix[:]) + "_"
	dir := filepath.Join(t.TempDir(), "passwords")
	t.Setenv("BERTH_E2E_SHARED_PG_DSN", server)
	e := e2etest.New(t, map[string]any{"shared-pg": map[string]any{"type": "postgres", "spec": map[string]any{
		"dsn_env": "BERTH_E2E_SHARED_PG_DSN", "password_dir": dir, "name_prefix": prefix,
	}}})
	admin, err := pgx.Connect(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropPrefixed(t, admin, prefix) })
	count := func(query string) int {
		t.Helper()
		var n int
		if err := admin.QueryRow(t.Context(), query, prefix).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	e.StartAgent("e2e-agent", "--poll-interval", "200ms", "--backoff-base", "100ms", "--backoff-max", "1s", "--health-interval", "1s")
	const within = time.Minute

	id := e.Create("--type", "postgres", "--name", "orders", "--arg", "connections=3")
	r := e.WaitReady(id, within)
	for _, key := range []string{"host", "port", "database", "user", "password_file"} {
		if r.Config[key] == nil {
			t.Fatalf("config %v has no %s", r.Config, key)
		}
	}
	if !strings.HasPrefix(r.Config["database"].(string), prefix) {
		t.Fatalf("config %v: the database is not the provisioner's", r.Config)
	}
	if err := loginWithConfig(t.Context(), server, r.Config); err != nil {
		t.Fatalf("login with the resource's config: %v", err)
	}
	if got := count("SELECT rolconnlimit FROM pg_roles WHERE starts_with(rolname, $1)"); got != 3 {
		t.Fatalf("rolconnlimit %d, want 3", got)
	}

	// The role dropped out of band, as an operator would: the health check re-creates it.
	name := r.Config["user"].(string)
	cfg, err := pgx.ParseConfig(server)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = name
	inDatabase, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"REASSIGN OWNED BY %s TO CURRENT_USER", "DROP OWNED BY %s", "DROP ROLE %s"} {
		if _, err := inDatabase.Exec(t.Context(), strings.Replace(s, "%s", pgx.Identifier{name}.Sanitize(), 1)); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	inDatabase.Close(t.Context())
	e.Eventually("the health check re-creates the role", within, func() (bool, string) {
		err := loginWithConfig(t.Context(), server, r.Config)
		return err == nil, fmt.Sprint(err)
	})
	e.Eventually("the repair is in the resource's history", within, func() (bool, string) {
		out := e.Berth("resource", "events", id, "-o", "json")
		return strings.Contains(out, `"kind": "repair"`) && strings.Contains(out, "role "+name+" re-created"), out
	})

	e.Berth("resource", "update", id, "--arg", "connections=6")
	e.WaitReady(id, within)
	if got := count("SELECT rolconnlimit FROM pg_roles WHERE starts_with(rolname, $1)"); got != 6 {
		t.Fatalf("rolconnlimit %d after the resize, want 6", got)
	}

	e.Berth("resource", "hibernate", id)
	e.WaitResource(id, "hibernated", within, func(r e2etest.Resource) bool { return r.Status == "hibernated" })
	var pe *pgconn.PgError
	if err := loginWithConfig(t.Context(), server, r.Config); !errors.As(err, &pe) || pe.Code != "28000" {
		t.Fatalf("login while hibernated: %v, want refused (28000)", err)
	}
	e.Berth("resource", "wake", id)
	e.WaitReady(id, within)
	if err := loginWithConfig(t.Context(), server, r.Config); err != nil {
		t.Fatalf("login once woken: %v", err)
	}

	e.Berth("resource", "delete", id)
	e.WaitCount("the resource's row is gone", within, 0, "SELECT count(*) FROM resources WHERE id = $1", id)
	if n := count("SELECT count(*) FROM pg_database WHERE starts_with(datname, $1)") + count("SELECT count(*) FROM pg_roles WHERE starts_with(rolname, $1)"); n != 0 {
		t.Fatalf("%d databases and roles left on the server after the delete", n)
	}
}

// loginWithConfig logs in as a client of a postgres resource would: the config's user
// and database, the password read from the file it names (the server's address is the
// test server's).
func loginWithConfig(ctx context.Context, server string, config map[string]any) error {
	cfg, err := pgx.ParseConfig(server)
	if err != nil {
		return err
	}
	password, err := os.ReadFile(config["password_file"].(string))
	if err != nil {
		return err
	}
	cfg.User, cfg.Database, cfg.Password = config["user"].(string), config["database"].(string), strings.TrimSpace(string(password))
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// dropPrefixed drops the databases and roles whose names start with prefix.
func dropPrefixed(t *testing.T, admin *pgx.Conn, prefix string) {
	ctx := context.Background()
	defer admin.Close(ctx)
	for _, q := range []struct{ list, drop string }{
		{"SELECT datname FROM pg_database WHERE starts_with(datname, $1)", "DROP DATABASE IF EXISTS %s WITH (FORCE)"},
		{"SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1)", "DROP ROLE IF EXISTS %s"},
	} {
		rows, err := admin.Query(ctx, q.list, prefix)
		if err != nil {
			t.Errorf("clean up: %v", err)
			return
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Errorf("clean up: %v", err)
			return
		}
		for _, n := range names {
			if _, err := admin.Exec(ctx, strings.Replace(q.drop, "%s", pgx.Identifier{n}.Sanitize(), 1)); err != nil {
				t.Errorf("clean up %s: %v", n, err)
			}
		}
	}
}
