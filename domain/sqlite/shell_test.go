package sqlite_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// sqliteShell returns the path of the distribution's sqlite3 shell. The README says it may
// be used on the agent's file, so the test fails, never skips, without it.
func sqliteShell(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Fatalf("the sqlite3 shell is needed to check the database is readable by the distribution's SQLite: install it (Debian: apt-get install sqlite3): %v", err)
	}
	return path
}

// runShell runs the sqlite3 shell on the file with sql on its standard input, and returns
// what it printed.
func runShell(ctx context.Context, t *testing.T, shell, path, sql string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, shell, "-batch", "-bail", path)
	cmd.Stdin = strings.NewReader(sql)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const shellCheck = "SELECT name FROM resources ORDER BY name;\nPRAGMA integrity_check;\n"

// A database made by the agent can be read by the distribution's sqlite3 shell (Debian 12
// has SQLite 3.40): a SELECT works and the file passes the integrity check.
func TestDistributionShellReadsTheDatabase(t *testing.T) {
	ctx := testContext(t)
	shell := sqliteShell(t)
	path := filepath.Join(t.TempDir(), "berth.db")
	st := openState(t, path)
	if _, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web"}); err != nil {
		t.Fatal(err)
	}
	version, _ := runShell(ctx, t, shell, ":memory:", "SELECT sqlite_version();\n")
	out, err := runShell(ctx, t, shell, path, shellCheck)
	if err != nil || out != "web\nok\n" {
		t.Fatalf("sqlite3 %s (SQLite %s) on the agent's database: %v\n%s\nwant the resource's name and ok", shell, strings.TrimSpace(version), err, out)
	}
}

// A database made before the schema kept to what SQLite 3.40 reads is made readable by
// migrating it.
func TestMigratingMakesAnOlderDatabaseReadableByTheShell(t *testing.T) {
	ctx := testContext(t)
	shell := sqliteShell(t)
	path := filepath.Join(t.TempDir(), "berth.db")
	st := openState(t, path)
	if _, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web"}); err != nil {
		t.Fatal(err)
	}
	// Put back the trigger as migration 0001 created it, and forget the migration that
	// replaced it.
	first, err := os.ReadFile(filepath.Join("migrations", "0001_resources.sql"))
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(first), "CREATE TRIGGER resources_provisioner_fixed")
	end := strings.Index(string(first)[start:], "END;")
	if start < 0 || end < 0 {
		t.Fatal("migration 0001 no longer creates resources_provisioner_fixed: update this test")
	}
	oldTrigger := string(first)[start : start+end+len("END;")]
	for _, stmt := range []string{
		`DROP TRIGGER resources_provisioner_fixed`,
		oldTrigger,
		`DELETE FROM schema_migrations WHERE version = 5`,
	} {
		if _, err := st.DB().ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if out, err := runShell(ctx, t, shell, path, shellCheck); err == nil {
		t.Fatalf("sqlite3 read the database with the old trigger (%q): this test no longer shows the migration fixes anything", out)
	}

	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	out, err := runShell(ctx, t, shell, path, shellCheck)
	if err != nil || out != "web\nok\n" {
		t.Fatalf("sqlite3 on the migrated database: %v\n%s\nwant the resource's name and ok", err, out)
	}
}

// The distribution's sqlite3 shell makes the lifecycle controls with plain SQL as the CLI
// does: its SQLite runs the triggers (a control event each, labels bumping the generation,
// the retry stamp put in the stored form) and refuses hibernating a resource being deleted.
func TestDistributionShellWritesTheControls(t *testing.T) {
	ctx := testContext(t)
	shell := sqliteShell(t)
	path := filepath.Join(t.TempDir(), "berth.db")
	st := openState(t, path)
	r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := runShell(ctx, t, shell, path, `
		UPDATE resources SET paused = true;
		UPDATE resources SET labels = '{"team": "data"}';
		UPDATE resources SET retry_requested_at = datetime('now');
		UPDATE resources SET hibernate = true;
		UPDATE resources SET status = 'deleting';
		SELECT kind || ' ' || message FROM resource_events ORDER BY seq;
		SELECT length(retry_requested_at), generation FROM resources;
		UPDATE resources SET hibernate = false;
	`)
	want := "status created\ncontrol paused\ncontrol labels changed: team=data\ncontrol retry requested\ncontrol hibernate requested\nstatus \n24|2\n"
	if err == nil || !strings.HasPrefix(out, want) || !strings.Contains(out, "cannot be hibernated or woken") {
		t.Fatalf("sqlite3 making the controls: %v\n%s\nwant\n%sand waking a resource being deleted refused", err, out, want)
	}
	got, err := st.GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Paused || !got.Hibernate || got.Labels["team"] != "data" || got.RetryRequestedAt == nil || got.Status != domain.StatusDeleting {
		t.Errorf("after the shell's controls: %+v", got)
	}
}
