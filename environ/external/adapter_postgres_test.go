package external

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/postgres"
	"github.com/berth-dev/berth/internal/pgtest"
)

// TestThePostgresBrokerPassesVerifyThroughTheAdapter holds the built-in postgres broker,
// on the real test server, to the protocol's contract: served through the Adapter, it
// passes the conformance suite (hibernate and wake included, as it declares), every call
// and answer matches the OpenAPI document, and the suite leaves no database, role or
// password file behind.
func TestThePostgresBrokerPassesVerifyThroughTheAdapter(t *testing.T) {
	ctx := context.Background()
	url, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	prefix := "bv" + hex.EncodeToString(suffix[:]) + "_"
	t.Cleanup(func() { dropPrefixed(t, admin, prefix) })

	t.Setenv("BERTH_TEST_SHARED_PG_DSN", url)
	dir := t.TempDir()
	shared, err := postgres.New("shared-pg", jsonRaw(t, map[string]any{"dsn_env": "BERTH_TEST_SHARED_PG_DSN", "password_dir": dir, "name_prefix": prefix}), environ.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	v := newValidating(t, &Adapter{Env: shared, Types: []domain.ResourceType{postgres.Name}})
	srv := httptest.NewServer(v)
	defer srv.Close()
	results, err := Verify(ctx, jsonRaw(t, map[string]any{"types": []string{string(postgres.Name)}, "hibernate": true, "url": srv.URL}),
		VerifyConfig{Type: string(postgres.Name), Args: map[string]any{"connections": 3}}, environ.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	expectAllPass(t, results, "hibernate-and-wake")
	v.check()

	for _, q := range []string{
		"SELECT count(*) FROM pg_database WHERE starts_with(datname, $1)",
		"SELECT count(*) FROM pg_roles WHERE starts_with(rolname, $1)",
	} {
		var n int
		if err := admin.QueryRow(ctx, q, prefix).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s = %d once the suite deprovisioned what it made", q, n)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d password files left once the suite deprovisioned what it made", len(left))
	}
}

// dropPrefixed drops every database and role whose name starts with prefix: whatever a
// failed run left.
func dropPrefixed(t *testing.T, admin *pgx.Conn, prefix string) {
	ctx := context.Background()
	for _, step := range []struct{ query, drop string }{
		{"SELECT datname FROM pg_database WHERE starts_with(datname, $1)", "DROP DATABASE IF EXISTS %s WITH (FORCE)"},
		{"SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1)", "DROP ROLE IF EXISTS %s"},
	} {
		rows, err := admin.Query(ctx, step.query, prefix)
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
			if _, err := admin.Exec(ctx, fmt.Sprintf(step.drop, pgx.Identifier{n}.Sanitize())); err != nil {
				t.Errorf("clean up %s: %v", n, err)
			}
		}
	}
}
