package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/sqlite"
	"github.com/berth-dev/berth/domain/statetest"
)

// testTimeout bounds every test's database work, so a hang fails instead of stalling.
const testTimeout = 30 * time.Second

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// openState opens and migrates the database file at path, closed when t ends.
func openState(t testing.TB, path string) *sqlite.State {
	t.Helper()
	ctx := testContext(t)
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st
}

// openRaw opens the file as another program would: its own connections, a busy timeout,
// and nothing of this package.
func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// sqlArgs passes times in the stored form.
func sqlArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if at, ok := a.(time.Time); ok {
			a = sqlite.FormatTime(at)
		}
		out[i] = a
	}
	return out
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func execWith(db execer) statetest.ExecFunc {
	return func(ctx context.Context, query string, args ...any) (int64, error) {
		res, err := db.ExecContext(ctx, query, sqlArgs(args)...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
}

// migratedTemplate is a database file migrated once for the whole test binary, which
// newBackend copies: applying the migrations takes over a second under the race detector,
// and the contract suite wants a fresh database for each of its more than a hundred tests.
// Each copy still goes through Open and Migrate (which finds nothing to apply);
// TestMigrateIsIdempotentAndSafeConcurrently and the migration tests migrate from nothing.
// The copies share the template's DatabaseIdentity, which the contract suite does not read.
var migratedTemplate struct {
	once sync.Once
	dir  string
	data []byte
	err  error
}

// TestMain removes the template's directory once the tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if migratedTemplate.dir != "" {
		_ = os.RemoveAll(migratedTemplate.dir)
	}
	os.Exit(code)
}

// migratedFile writes a copy of the migrated template at path.
func migratedFile(t *testing.T, path string) {
	t.Helper()
	tpl := &migratedTemplate
	tpl.once.Do(func() {
		tpl.dir, tpl.err = os.MkdirTemp("", "berth-sqlite-template-")
		if tpl.err != nil {
			return
		}
		file := filepath.Join(tpl.dir, "berth.db")
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		st, err := sqlite.Open(ctx, file)
		if err != nil {
			tpl.err = err
			return
		}
		err = st.Migrate(ctx)
		// Closing the last connection checkpoints the log into the file and removes it,
		// so the file alone is the whole database.
		st.Close()
		if err != nil {
			tpl.err = err
			return
		}
		if _, err := os.Stat(file + "-wal"); !errors.Is(err, os.ErrNotExist) {
			tpl.err = fmt.Errorf("the template's write-ahead log outlived its close (stat: %v)", err)
			return
		}
		tpl.data, tpl.err = os.ReadFile(file)
	})
	if tpl.err != nil {
		t.Fatalf("migrated template: %v", tpl.err)
	}
	if err := os.WriteFile(path, tpl.data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newBackend(t *testing.T) *statetest.Backend {
	path := filepath.Join(t.TempDir(), "berth.db")
	migratedFile(t, path)
	st := openState(t, path)
	raw := openRaw(t, path)
	return &statetest.Backend{
		State:   st,
		Dialect: statetest.SQLite,
		Exec:    execWith(raw),
		QueryRow: func(ctx context.Context, query string, args ...any) statetest.Row {
			return raw.QueryRowContext(ctx, query, sqlArgs(args)...)
		},
		Tx: func(ctx context.Context, f func(exec statetest.ExecFunc) error) error {
			tx, err := raw.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := f(execWith(tx)); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		},
		Reopen: func(t *testing.T) domain.State { return openState(t, path) },
	}
}

func TestContract(t *testing.T) {
	statetest.Run(t, newBackend)
}

func TestMigrateIsIdempotentAndSafeConcurrently(t *testing.T) {
	ctx := testContext(t)
	path := filepath.Join(t.TempDir(), "berth.db")
	const agents = 4
	states := make([]*sqlite.State, agents)
	for i := range states {
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer st.Close()
		states[i] = st
	}
	errs := make([]error, agents)
	var wg sync.WaitGroup
	for i, st := range states {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = st.Migrate(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent migrate %d: %v", i, err)
		}
	}
	if err := states[0].Migrate(ctx); err != nil {
		t.Fatalf("migrate again: %v", err)
	}
	var applied, versions int
	if err := states[0].DB().QueryRowContext(ctx, `SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&applied, &versions); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(files) || versions != len(files) {
		t.Fatalf("schema_migrations has %d rows of %d versions, want each of the %d migrations once", applied, versions, len(files))
	}
	if _, err := states[1].CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "after-migrate"}); err != nil {
		t.Fatalf("schema unusable after concurrent migrations: %v", err)
	}
}

func TestOpenNeedsAFileInAnExistingDirectory(t *testing.T) {
	ctx := testContext(t)
	for _, path := range []string{"", ":memory:", "file:berth.db"} {
		if st, err := sqlite.Open(ctx, path); err == nil {
			st.Close()
			t.Errorf("open %q succeeded, want it refused", path)
		}
	}
	missing := filepath.Join(t.TempDir(), "no-such-dir", "berth.db")
	_, err := sqlite.Open(ctx, missing)
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("open in a missing directory: %v, want an error naming the file and its directory", err)
	}

	relative := "relative.db"
	t.Chdir(t.TempDir())
	st := openState(t, relative)
	if !filepath.IsAbs(st.Path()) || filepath.Base(st.Path()) != relative {
		t.Fatalf("path of %q = %q, want it absolute", relative, st.Path())
	}
}

// The database and its -wal and -shm files hold every resource's configuration: a new
// database is readable by its owner only, and ExposedFiles names the files of one that is not.
func TestFilesArePrivate(t *testing.T) {
	ctx := testContext(t)
	path := filepath.Join(t.TempDir(), "berth.db")
	st := openState(t, path)
	if _, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v (want it created by an open database in WAL mode)", p, err)
		}
		if mode := info.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", p, mode)
		}
	}
	if exposed := sqlite.ExposedFiles(path); len(exposed) != 0 {
		t.Errorf("ExposedFiles of a new database = %v, want none", exposed)
	}
	for _, p := range []string{path, path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if exposed := sqlite.ExposedFiles(path); !slices.Equal(exposed, []string{path, path + "-shm"}) {
		t.Errorf("ExposedFiles after chmod 644 of the file and its -shm = %v, want both", exposed)
	}
}

func TestPingNoticesTheFileGoing(t *testing.T) {
	ctx := testContext(t)
	path := filepath.Join(t.TempDir(), "berth.db")
	st := openState(t, path)
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(ctx); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("ping after the file was moved away: %v, want an error naming it", err)
	}
}

func TestOpenWithEndedContextSaysSo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "berth.db"))
	if err == nil {
		st.Close()
		t.Fatal("open with an ended context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want it to wrap context.Canceled", err)
	}
}

// Times are stored in one sortable form, whatever form a writer used.
func TestTimesAreStoredInOneForm(t *testing.T) {
	ctx := testContext(t)
	path := filepath.Join(t.TempDir(), "berth.db")
	st := openState(t, path)
	raw := openRaw(t, path)
	r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, `UPDATE resources SET next_attempt_at = '2030-01-02 05:04:06.5+02:00', ready_at = '2030-01-02' WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	var next, ready, created string
	if err := raw.QueryRowContext(ctx, `SELECT next_attempt_at, ready_at, created_at FROM resources WHERE id = $1`, r.ID).Scan(&next, &ready, &created); err != nil {
		t.Fatal(err)
	}
	if next != "2030-01-02T03:04:06.500Z" || ready != "2030-01-02T00:00:00.000Z" {
		t.Errorf("stored next_attempt_at %q and ready_at %q, want 2030-01-02T03:04:06.500Z and 2030-01-02T00:00:00.000Z", next, ready)
	}
	if want := sqlite.FormatTime(r.CreatedAt); created != want {
		t.Errorf("stored created_at %q, want %q", created, want)
	}
	if _, err := raw.ExecContext(ctx, `UPDATE resources SET next_attempt_at = 'soon' WHERE id = $1`, r.ID); err == nil {
		t.Error("a time SQLite cannot read was accepted")
	}
}
