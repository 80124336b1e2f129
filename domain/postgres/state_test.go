package postgres_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/domain/statetest"
	"github.com/berth-dev/berth/internal/pgtest"
)

// testTimeout bounds every test's database work, so a hang fails instead of stalling.
const testTimeout = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newState opens a migrated State on a fresh database of t's own.
func newState(t *testing.T) *postgres.State {
	t.Helper()
	ctx := testContext(t)
	st, err := postgres.Open(ctx, pgtest.New(t), postgres.PoolConfig{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st
}

func mustCreate(t *testing.T, st *postgres.State, nr domain.NewResource) domain.Resource {
	t.Helper()
	r, err := st.CreateResource(testContext(t), nr)
	if err != nil {
		t.Fatalf("create %q: %v", nr.Name, err)
	}
	return r
}

func runtime(name string) domain.NewResource {
	return domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "alice", Args: map[string]any{"slots": 1}}
}

func mustExec(t *testing.T, st *postgres.State, sql string, args ...any) int64 {
	t.Helper()
	tag, err := st.Pool().Exec(testContext(t), sql, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
	return tag.RowsAffected()
}

// newBackend gives the contract suite a migrated database of the test's own.
func newBackend(t *testing.T) *statetest.Backend {
	url := pgtest.New(t)
	open := func(t *testing.T) *postgres.State {
		t.Helper()
		ctx := testContext(t)
		st, err := postgres.Open(ctx, url, postgres.PoolConfig{})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(st.Close)
		if err := st.Migrate(ctx); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		return st
	}
	st := open(t)
	execWith := func(db interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	}) statetest.ExecFunc {
		return func(ctx context.Context, query string, args ...any) (int64, error) {
			tag, err := db.Exec(ctx, query, args...)
			return tag.RowsAffected(), err
		}
	}
	return &statetest.Backend{
		State:   st,
		Dialect: statetest.Postgres,
		Exec:    execWith(st.Pool()),
		QueryRow: func(ctx context.Context, query string, args ...any) statetest.Row {
			return st.Pool().QueryRow(ctx, query, args...)
		},
		Tx: func(ctx context.Context, f func(exec statetest.ExecFunc) error) error {
			return pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error { return f(execWith(tx)) })
		},
		Reopen: func(t *testing.T) domain.State { return open(t) },
	}
}

func TestContract(t *testing.T) {
	statetest.Run(t, newBackend)
}

func TestMigrateIsIdempotentAndSafeConcurrently(t *testing.T) {
	ctx := testContext(t)
	url := pgtest.New(t)
	const agents = 8
	states := make([]*postgres.State, agents)
	for i := range states {
		st, err := postgres.Open(ctx, url, postgres.PoolConfig{MaxConns: 2})
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
	if err := states[0].Pool().QueryRow(ctx, `SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&applied, &versions); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	migrations := len(files)
	if applied != migrations || versions != migrations {
		t.Fatalf("schema_migrations has %d rows of %d versions, want each of the %d migrations once", applied, versions, migrations)
	}
	if _, err := states[0].CreateResource(ctx, runtime("after-migrate")); err != nil {
		t.Fatalf("schema unusable after concurrent migrations: %v", err)
	}
}

func TestOpenErrorsHideThePassword(t *testing.T) {
	ctx := testContext(t)
	for _, url := range []string{
		"postgres://berth:s3cret-pw@127.0.0.1:1/berth?sslmode=disable&connect_timeout=5",
		"postgres://berth:s3cret-pw@127.0.0.1:notaport/berth",
		"host=127.0.0.1 port=1 user=berth password=s3cret-pw dbname=berth sslmode=disable connect_timeout=5",
	} {
		st, err := postgres.Open(ctx, url, postgres.PoolConfig{})
		if err == nil {
			st.Close()
			t.Fatalf("open of a server that does not listen succeeded, want a connection error")
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("open error reveals the password: %v", err)
		}
		if !strings.Contains(err.Error(), "berth") {
			t.Errorf("open error does not name the user or database: %v", err)
		}
	}
}

func TestPing(t *testing.T) {
	st := newState(t)
	if err := st.Ping(testContext(t)); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func TestOpenWithEndedContextSaysSo(t *testing.T) {
	url := pgtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := postgres.Open(ctx, url, postgres.PoolConfig{MaxConns: 1})
	if err == nil {
		st.Close()
		t.Fatal("open with an ended context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want it to wrap context.Canceled", err)
	}
}
