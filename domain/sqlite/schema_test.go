package sqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/internal/pgtest"
)

// sqliteOnlyTables stand in for PostgreSQL features SQLite lacks; they are not part of the
// schema the two share. (write_intents: PostgreSQL's SET LOCAL berth.*.)
var sqliteOnlyTables = []string{"write_intents"}

// postgresOnlyTables serve PostgreSQL features SQLite has no form of. (berth_owner_grants:
// the owners each client role acts for, under row-level security; SQLite has no roles.
// announce_channel: the secret name of the NOTIFY channel new rows are announced on;
// SQLite has no NOTIFY.)
var postgresOnlyTables = []string{"announce_channel", "berth_owner_grants"}

// The SQLite migrations mirror the PostgreSQL ones: the same files, and after migrating the
// same tables with the same columns in the same order.
func TestMigrationsKeepInStepWithPostgres(t *testing.T) {
	ctx := testContext(t)
	names := func(dir string) []string {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range files {
			files[i] = filepath.Base(f)
		}
		return files
	}
	lite, pg := names("migrations"), names(filepath.Join("..", "postgres", "migrations"))
	if len(lite) == 0 || !slices.Equal(lite, pg) {
		t.Fatalf("migrations differ:\nsqlite:     %v\npostgresql: %v\nadd each migration in both dialects, with the same name", lite, pg)
	}

	liteColumns := sqliteSchema(ctx, t)
	pgColumns := postgresSchema(ctx, t)
	for table, columns := range pgColumns {
		if slices.Contains(postgresOnlyTables, table) {
			continue
		}
		if got := liteColumns[table]; !slices.Equal(got, columns) {
			t.Errorf("table %s:\nsqlite columns:     %v\npostgresql columns: %v", table, got, columns)
		}
	}
	for table := range liteColumns {
		if _, ok := pgColumns[table]; !ok {
			t.Errorf("table %s is in the sqlite schema only", table)
		}
	}
}

func sqliteSchema(ctx context.Context, t *testing.T) map[string][]string {
	t.Helper()
	st := openState(t, filepath.Join(t.TempDir(), "berth.db"))
	rows, err := st.DB().QueryContext(ctx, `
		SELECT m.name, p.name FROM sqlite_schema m JOIN pragma_table_info(m.name) p
		 WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\_%' ESCAPE '\'
		   AND m.name NOT IN ('`+strings.Join(sqliteOnlyTables, "', '")+`')
		 ORDER BY m.name, p.cid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			t.Fatal(err)
		}
		out[table] = append(out[table], column)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func postgresSchema(ctx context.Context, t *testing.T) map[string][]string {
	t.Helper()
	st, err := postgres.Open(ctx, pgtest.New(t), postgres.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := st.Pool().Query(ctx, `
		SELECT table_name::text, column_name::text FROM information_schema.columns
		 WHERE table_schema = current_schema()
		 ORDER BY table_name, ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			t.Fatal(err)
		}
		out[table] = append(out[table], column)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
