package postgres

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/pgtest"
	"github.com/berth-dev/berth/internal/testkit"
)

// fixture is one test's environ on the test server, with names of its own: every database
// and role it makes starts with prefix, and all of them are dropped when the test ends.
type fixture struct {
	t      *testing.T
	env    *pgEnviron
	admin  *pgx.Conn
	server *pgx.ConnConfig
	prefix string
	dir    string
	logs   *testkit.Buffer
}

// newFixture builds a postgres environ whose admin DSN is the test server's, passed by
// reference in an environment variable, with extra spec keys.
func newFixture(t *testing.T, extra map[string]any) *fixture {
	t.Helper()
	url, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	server, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	f := &fixture{t: t, admin: admin, server: server, prefix: "bt" + hex.EncodeToString(suffix[:]) + "_", dir: filepath.Join(t.TempDir(), "passwords"), logs: &testkit.Buffer{}}
	t.Cleanup(f.dropAll)
	t.Setenv("BERTH_TEST_SHARED_PG_DSN", url)
	spec := map[string]any{"dsn_env": "BERTH_TEST_SHARED_PG_DSN", "password_dir": f.dir, "name_prefix": f.prefix}
	for k, v := range extra {
		spec[k] = v
	}
	raw, _ := json.Marshal(spec)
	env, err := New("shared-pg", raw, environ.Deps{Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { env.Close() })
	f.env = env.(*pgEnviron)
	return f
}

// dropAll drops what the test made, whatever state it left it in.
func (f *fixture) dropAll() {
	ctx := context.Background()
	defer f.admin.Close(ctx)
	for _, q := range []string{
		"SELECT datname FROM pg_database WHERE starts_with(datname, $1)",
		"SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1)",
	} {
		rows, err := f.admin.Query(ctx, q, f.prefix)
		if err != nil {
			f.t.Errorf("clean up: %v", err)
			return
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			f.t.Errorf("clean up: %v", err)
			return
		}
		for _, n := range names {
			stmt := dropDatabase(n)
			if strings.Contains(q, "pg_roles") {
				stmt = dropRole(n)
			}
			if _, err := f.admin.Exec(ctx, stmt); err != nil {
				f.t.Errorf("clean up %s: %v", n, err)
			}
		}
	}
}

func newResource() *environ.Resource {
	return &environ.Resource{ID: uuid.NewString(), Type: Name}
}

func withArgs(args map[string]any) *environ.ResourceOptions {
	return &environ.ResourceOptions{Args: args, Generation: 1}
}

// reconcile reconciles r with args and returns it with the state and config saved.
func (f *fixture) reconcile(r *environ.Resource, args map[string]any) *environ.Resource {
	f.t.Helper()
	got, err := f.env.Reconcile(f.t.Context(), r, withArgs(args))
	if err != nil {
		f.t.Fatalf("Reconcile %s: %v", r.ID, err)
	}
	return got
}

// login connects as the resource's role, with the password from the file its config
// names, to database db (its own when empty), as a client would: to the host and port of
// its config, from the address where the server asks for the password, so that a login
// that works proves the password.
func (f *fixture) login(r *environ.Resource, db string) error {
	data, err := os.ReadFile(r.Config["password_file"].(string))
	if err != nil {
		return err
	}
	return f.loginWith(r, db, strings.TrimSpace(string(data)))
}

// loginWith is login with password.
func (f *fixture) loginWith(r *environ.Resource, db, password string) error {
	f.t.Helper()
	if err := checkPasswordRule(f.t.Context(), f.admin, f.server); err != nil {
		f.t.Fatal(err)
	}
	cfg := fromPasswordAddr(f.server)
	cfg.Host, cfg.Port = r.Config["host"].(string), uint16(r.Config["port"].(int))
	cfg.User, cfg.Password = r.Config["user"].(string), password
	cfg.Database = r.Config["database"].(string)
	if db != "" {
		cfg.Database = db
	}
	conn, err := pgx.ConnectConfig(f.t.Context(), cfg)
	if err != nil {
		return err
	}
	defer conn.Close(f.t.Context())
	_, err = conn.Exec(f.t.Context(), "CREATE TABLE IF NOT EXISTS berth_probe (x int)")
	return err
}

func (f *fixture) count(query string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.admin.QueryRow(f.t.Context(), query, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// wantCode fails the test unless err is a PostgreSQL error of SQLSTATE code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("%s: got %v, want SQLSTATE %s", what, err, code)
	}
}

// checkPassword checks that the role's stored SCRAM verifier is that of the password in
// its file: the server's record of it, where login proves it by the server's own
// authentication.
func (f *fixture) checkPassword(r *environ.Resource) {
	f.t.Helper()
	var stored string
	if err := f.admin.QueryRow(f.t.Context(), "SELECT rolpassword FROM pg_authid WHERE rolname = $1", r.Config["user"]).Scan(&stored); err != nil {
		f.t.Fatalf("read the verifier: %v", err)
	}
	data, err := os.ReadFile(r.Config["password_file"].(string))
	if err != nil {
		f.t.Fatal(err)
	}
	// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
	head, _, _ := strings.Cut(strings.TrimPrefix(stored, "SCRAM-SHA-256$"), "$")
	iter, saltB64, _ := strings.Cut(head, ":")
	n, _ := strconv.Atoi(iter)
	salt, err := base64.StdEncoding.DecodeString(saltB64)
	if err != nil || n == 0 {
		f.t.Fatalf("stored password is no SCRAM verifier")
	}
	want, err := scramVerifierWithSalt(strings.TrimSpace(string(data)), salt, n)
	if err != nil || want != stored {
		f.t.Fatalf("the stored verifier of %s is not that of the password in its file", r.Config["user"])
	}
}

// TestFiftyDatabasesThroughTheirLife creates 50 databases, 8 at a time, and takes each
// through its life: its own role logs in to it with the password from its file, where the
// server asks for one (scram-sha-256), is refused with a wrong password and is refused on
// its neighbour's database with its right one, a resize
// sets the role's connection limit, hibernating refuses its login and waking restores it
// with the same password, and deleting leaves nothing in pg_database or pg_roles.
func TestFiftyDatabasesThroughTheirLife(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	const n = 50
	rs := make([]*environ.Resource, n)
	each := func(what string, fn func(i int) error) {
		t.Helper()
		var g errgroup.Group
		g.SetLimit(8)
		for i := range rs {
			g.Go(func() error {
				if err := fn(i); err != nil {
					return fmt.Errorf("%s %d: %w", what, i, err)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}

	each("create", func(i int) error {
		r, err := f.env.Reconcile(ctx, newResource(), withArgs(nil))
		if err != nil {
			return err
		}
		rs[i] = r
		return f.env.AwaitReady(ctx, r)
	})
	if got := f.count("SELECT count(*) FROM pg_database WHERE starts_with(datname, $1)", f.prefix); got != n {
		t.Fatalf("%d databases, want %d", got, n)
	}
	passwords := make([]string, n)
	for i, r := range rs {
		if err := f.login(r, ""); err != nil {
			t.Fatalf("resource %d: login to its own database: %v", i, err)
		}
		wantCode(t, fmt.Sprintf("resource %d: login to its own database with a wrong password", i), f.loginWith(r, "", "not-its-password"), "28P01")
		neighbour := rs[(i+1)%n].Config["database"].(string)
		wantCode(t, fmt.Sprintf("resource %d: login to its neighbour's database", i), f.login(r, neighbour), "42501")
		f.checkPassword(r)
		if r.Config["port"] != int(f.server.Port) || r.Config["host"] != f.server.Host {
			t.Fatalf("config %v does not name the server", r.Config)
		}
		for k, v := range r.State {
			if s, ok := v.(string); ok && strings.Contains(s, "password") {
				t.Fatalf("state %s = %q", k, s)
			}
		}
		data, _ := os.ReadFile(r.Config["password_file"].(string))
		passwords[i] = string(data)
		if info, err := os.Stat(r.Config["password_file"].(string)); err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("password file: %v, %v; want mode 0600", info, err)
		}
	}
	var super, createDB, createRole bool
	if err := f.admin.QueryRow(ctx, "SELECT bool_or(rolsuper), bool_or(rolcreatedb), bool_or(rolcreaterole) FROM pg_roles WHERE starts_with(rolname, $1)", f.prefix).Scan(&super, &createDB, &createRole); err != nil || super || createDB || createRole {
		t.Fatalf("roles: superuser %v, createdb %v, createrole %v (%v); want none", super, createDB, createRole, err)
	}

	each("resize", func(i int) error {
		r, err := f.env.Reconcile(ctx, rs[i], withArgs(map[string]any{"connections": 2 + i%5}))
		rs[i] = r
		return err
	})
	sum := 0
	for i := range rs {
		sum += 2 + i%5
	}
	if c, err := f.env.Capacity(ctx); err != nil || c.Unit != "connections" || c.Used != int64(sum) || c.Total < 1 {
		t.Fatalf("Capacity = %+v, %v; want %d connections used", c, err, sum)
	}
	if units, err := f.env.Units(rs[3], withArgs(map[string]any{"connections": 5})); err != nil || units != 5 {
		t.Fatalf("Units = %d, %v; want 5", units, err)
	}
	for i, r := range rs {
		if got := f.count("SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", r.Config["user"]); got != 2+i%5 {
			t.Fatalf("resource %d: rolconnlimit %d, want %d", i, got, 2+i%5)
		}
		if len(r.Repairs) > 0 {
			t.Fatalf("resource %d: a resize reported repairs %v", i, r.Repairs)
		}
	}

	each("hibernate", func(i int) error {
		r, err := f.env.Hibernate(ctx, rs[i], withArgs(map[string]any{"connections": 2 + i%5}))
		rs[i] = r
		return err
	})
	for i, r := range rs {
		wantCode(t, fmt.Sprintf("resource %d: login while hibernated", i), f.login(r, ""), "28000")
		if _, err := f.env.CheckResource(ctx, r, withArgs(map[string]any{"connections": 2 + i%5})); err != nil {
			t.Fatalf("resource %d: check while hibernated: %v", i, err)
		}
	}

	each("wake", func(i int) error {
		r, err := f.env.Reconcile(ctx, rs[i], withArgs(map[string]any{"connections": 2 + i%5}))
		rs[i] = r
		if err == nil && len(r.Repairs) > 0 {
			err = fmt.Errorf("waking reported repairs %v", r.Repairs)
		}
		return err
	})
	for i, r := range rs {
		if err := f.login(r, ""); err != nil {
			t.Fatalf("resource %d: login once woken: %v", i, err)
		}
		if data, _ := os.ReadFile(r.Config["password_file"].(string)); string(data) != passwords[i] {
			t.Fatalf("resource %d: the password changed", i)
		}
		f.checkPassword(r)
	}

	each("delete", func(i int) error { return f.env.Deprovision(ctx, rs[i]) })
	for _, q := range []string{
		"SELECT count(*) FROM pg_database WHERE starts_with(datname, $1)",
		"SELECT count(*) FROM pg_roles WHERE starts_with(rolname, $1)",
	} {
		if got := f.count(q, f.prefix); got != 0 {
			t.Fatalf("%s = %d after deleting every resource", q, got)
		}
	}
	if left, _ := os.ReadDir(f.dir); len(left) != 0 {
		t.Fatalf("%d password files left", len(left))
	}
	if err := f.env.Deprovision(ctx, rs[0]); err != nil {
		t.Fatalf("Deprovision of a deleted resource: %v", err)
	}
	if err := f.env.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

// TestConcurrentReconcilesOfOneResource: many reconciles of one resource at once, as
// agents racing for it would, make one database and one role and all succeed.
func TestConcurrentReconcilesOfOneResource(t *testing.T) {
	f := newFixture(t, nil)
	r := newResource()
	var g errgroup.Group
	results := make([]*environ.Resource, 8)
	for i := range results {
		g.Go(func() error {
			got, err := f.env.Reconcile(t.Context(), r, withArgs(map[string]any{"connections": 3}))
			results[i] = got
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("a concurrent reconcile failed: %v", err)
	}
	name := f.env.objectName(r.ID)
	if got := f.count("SELECT count(*) FROM pg_database WHERE datname = $1", name); got != 1 {
		t.Fatalf("%d databases, want 1", got)
	}
	if got := f.count("SELECT count(*) FROM pg_roles WHERE rolname = $1", name); got != 1 {
		t.Fatalf("%d roles, want 1", got)
	}
	if err := f.login(results[0], ""); err != nil {
		t.Fatalf("login: %v", err)
	}
	f.checkPassword(results[0])
}

// TestDriftIsRepaired: a role dropped out of band is reported and re-created by the next
// check, and by the next reconcile; so are other drifts of grants, limits and powers, and
// a missing password file gets a new password.
func TestDriftIsRepaired(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	args := map[string]any{"connections": 4}
	r := f.reconcile(newResource(), args)
	name := r.Config["user"].(string)
	// As an operator would: what the role owns and may use is taken first, in its
	// database (which REASSIGN OWNED hands over too).
	dropRoleOutOfBand := func() {
		t.Helper()
		cfg := f.server.Copy()
		cfg.Database = name
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, s := range []string{"REASSIGN OWNED BY " + ident(name) + " TO CURRENT_USER", "DROP OWNED BY " + ident(name), "DROP ROLE " + ident(name)} {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	wantRepair := func(what string, got *environ.Resource, part string) {
		t.Helper()
		for _, line := range got.Repairs {
			if strings.Contains(line, part) {
				return
			}
		}
		t.Fatalf("%s: repairs %q, want one saying %q", what, got.Repairs, part)
	}

	dropRoleOutOfBand()
	if err := f.login(r, ""); err == nil {
		t.Fatalf("login works with the role dropped")
	}
	checked, err := f.env.CheckResource(ctx, r, withArgs(args))
	if err != nil {
		t.Fatalf("CheckResource: %v", err)
	}
	wantRepair("check", checked, "role "+name+" re-created")
	wantRepair("check", checked, "owner set back")
	if err := f.login(r, ""); err != nil {
		t.Fatalf("login once the check repaired the role: %v", err)
	}
	f.checkPassword(r)

	dropRoleOutOfBand()
	reconciled := f.reconcile(checked, args)
	wantRepair("reconcile", reconciled, "role "+name+" re-created")
	if err := f.login(r, ""); err != nil {
		t.Fatalf("login once the reconcile repaired the role: %v", err)
	}

	for _, s := range []string{
		"GRANT CONNECT ON DATABASE " + ident(name) + " TO PUBLIC",
		"ALTER ROLE " + ident(name) + " CREATEDB CONNECTION LIMIT 50",
	} {
		if _, err := f.admin.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Another resource's role gets in while its database is open to PUBLIC; the repair
	// ends its session.
	neighbour := f.reconcile(newResource(), nil)
	cfg := f.server.Copy()
	cfg.User, cfg.Database = neighbour.Config["user"].(string), name
	intruder, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("the neighbour cannot connect to a database open to PUBLIC: %v", err)
	}
	defer intruder.Close(ctx)
	checked, err = f.env.CheckResource(ctx, reconciled, withArgs(args))
	if err != nil {
		t.Fatalf("CheckResource: %v", err)
	}
	if err := intruder.Ping(ctx); err == nil {
		t.Fatalf("the neighbour's session outlived the repair of the grants")
	}
	wantRepair("check", checked, "access taken from PUBLIC")
	wantRepair("check", checked, "NOCREATEDB taken back")
	wantRepair("check", checked, "connection limit set back to 4 from 50")
	if got := f.count("SELECT count(*) FROM pg_roles WHERE rolname = $1 AND rolconnlimit = 4 AND NOT rolcreatedb", name); got != 1 {
		t.Fatalf("the role was not repaired")
	}
	if got := f.count("SELECT count(*) FROM pg_database WHERE datname = $1 AND has_database_privilege('public', oid, 'CONNECT')", name); got != 0 {
		t.Fatalf("PUBLIC may still connect")
	}

	before, _ := os.ReadFile(r.Config["password_file"].(string))
	if err := os.Remove(r.Config["password_file"].(string)); err != nil {
		t.Fatal(err)
	}
	checked, err = f.env.CheckResource(ctx, checked, withArgs(args))
	if err != nil {
		t.Fatalf("CheckResource: %v", err)
	}
	wantRepair("check", checked, "password file re-created")
	if after, _ := os.ReadFile(r.Config["password_file"].(string)); len(after) == 0 || string(after) == string(before) {
		t.Fatalf("the password was not rotated")
	}
	f.checkPassword(r)

	again, err := f.env.CheckResource(ctx, checked, withArgs(args))
	if err != nil || len(again.Repairs) > 0 {
		t.Fatalf("CheckResource with nothing drifted = %v, %v; want healthy, no repairs", again.Repairs, err)
	}
}

// TestANewPrefixMovesNoResource: a resource keeps its database when the provisioner's
// name_prefix changes, and new resources take the new prefix.
func TestANewPrefixMovesNoResource(t *testing.T) {
	f := newFixture(t, nil)
	r := f.reconcile(newResource(), nil)
	f.env.spec.NamePrefix = f.prefix + "new_"
	again := f.reconcile(r, nil)
	if again.Config["database"] != r.Config["database"] || len(again.Repairs) > 0 {
		t.Fatalf("after the prefix changed: config %v, repairs %v; want database %v kept", again.Config, again.Repairs, r.Config["database"])
	}
	if other := f.reconcile(newResource(), nil); !strings.HasPrefix(other.Config["database"].(string), f.prefix+"new_") {
		t.Fatalf("a new resource is named %v", other.Config["database"])
	}
	if err := f.env.Deprovision(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	if got := f.count("SELECT count(*) FROM pg_database WHERE datname = $1", r.Config["database"]); got != 0 {
		t.Fatalf("the database is left after its deprovision")
	}
}

// staleRow is a resource lookup that finds every row at another generation.
type staleRow struct{}

func (staleRow) GetResource(_ context.Context, id string) (domain.Resource, error) {
	return domain.Resource{ID: id, Generation: 99, Status: domain.StatusReady}, nil
}

// TestCheckRepairsNothingOnAStaleRow: a check whose resource moved on meanwhile leaves the
// drift for the next reconcile and says the row is stale.
func TestCheckRepairsNothingOnAStaleRow(t *testing.T) {
	f := newFixture(t, nil)
	r := f.reconcile(newResource(), nil)
	name := r.Config["user"].(string)
	if _, err := f.admin.Exec(t.Context(), "ALTER ROLE "+ident(name)+" CONNECTION LIMIT 77"); err != nil {
		t.Fatal(err)
	}
	f.env.resources = staleRow{}
	if _, err := f.env.CheckResource(t.Context(), r, withArgs(nil)); !errors.Is(err, domain.ErrStale) {
		t.Fatalf("CheckResource = %v, want domain.ErrStale", err)
	}
	if got := f.count("SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", name); got != 77 {
		t.Fatalf("rolconnlimit %d: the stale check repaired it", got)
	}
}

// TestNoSecretInErrorsOrLogs forces failures of every kind and checks that neither the
// admin DSN's password nor a role's password shows in an error or a log line.
func TestNoSecretInErrorsOrLogs(t *testing.T) {
	const dsnSecret = "Dsn-Secret-7f3a"
	var errs []error
	collect := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	// An admin DSN that does not parse, and one whose server does not answer.
	t.Setenv("BERTH_TEST_BAD_DSN", "postgres://admin:"+dsnSecret+"@127.0.0.1:notaport/db")
	_, err := New("bad", json.RawMessage(`{"dsn_env": "BERTH_TEST_BAD_DSN", "password_dir": "/nonexistent"}`), environ.Deps{})
	if err == nil {
		t.Fatalf("New accepted a DSN that does not parse")
	}
	collect(err)
	t.Setenv("BERTH_TEST_DEAD_DSN", "host=127.0.0.1 port=1 user=admin password="+dsnSecret+" connect_timeout=2")
	dir := t.TempDir()
	dead, err := New("dead", json.RawMessage(`{"dsn_env": "BERTH_TEST_DEAD_DSN", "password_dir": "`+dir+`"}`), environ.Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer dead.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	collect(dead.Check(ctx))
	_, err = dead.Reconcile(ctx, newResource(), withArgs(nil))
	if _, unavailable := environ.IsUnavailable(err); !unavailable {
		t.Fatalf("Reconcile against a dead server = %v, want an Unavailable error", err)
	}
	collect(err)

	// A role's password: a check and a wait on a hibernated role, a password directory
	// that cannot be written, args over the spec's bound.
	f := newFixture(t, map[string]any{"max_connections": 10})
	r := f.reconcile(newResource(), nil)
	password, err := os.ReadFile(r.Config["password_file"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.Exec(t.Context(), "ALTER ROLE "+ident(r.Config["user"].(string))+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(t.Context(), time.Second)
	defer cancelShort()
	collect(f.env.AwaitReady(short, r))
	f.env.resources = staleRow{}
	_, err = f.env.CheckResource(t.Context(), r, withArgs(nil))
	collect(err)
	_, err = f.env.Reconcile(t.Context(), r, withArgs(map[string]any{"connections": 11}))
	collect(err)
	other := newResource()
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.env.spec.PasswordDir = blocked
	_, err = f.env.Reconcile(t.Context(), other, withArgs(nil))
	collect(err)

	if len(errs) != 7 {
		t.Fatalf("%d errors forced, want 7: %v", len(errs), errs)
	}
	for _, secret := range []string{dsnSecret, strings.TrimSpace(string(password))} {
		for _, err := range errs {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows a secret", err)
			}
		}
		if strings.Contains(f.logs.String(), secret) {
			t.Errorf("the log shows a secret: %s", f.logs.String())
		}
	}
}

// TestWaitingForLoginEndsWithItsContext: AwaitReady of a role that cannot log in waits
// until its context ends and says why.
func TestWaitingForLoginEndsWithItsContext(t *testing.T) {
	f := newFixture(t, nil)
	r := f.reconcile(newResource(), nil)
	if err := f.env.AwaitReady(t.Context(), r); err != nil {
		t.Fatalf("AwaitReady: %v", err)
	}
	r, err := f.env.Hibernate(t.Context(), r, withArgs(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = f.env.AwaitReady(ctx, r)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not permitted to log in") {
		t.Fatalf("AwaitReady of a hibernated role = %v, want the deadline and the refusal", err)
	}
}

// TestSCRAMVerifierIsTheServers: the verifier the environ sends is the one the server
// makes of the same password and salt, so the password in the file is the role's.
func TestSCRAMVerifierIsTheServers(t *testing.T) {
	f := newFixture(t, nil)
	role := f.prefix + "scram"
	const password = "Known-Password-For-The-Test"
	if _, err := f.admin.Exec(t.Context(), "SET password_encryption = 'scram-sha-256'"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.Exec(t.Context(), "CREATE ROLE "+ident(role)+" PASSWORD "+literal(password)); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := f.admin.QueryRow(t.Context(), "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(strings.TrimPrefix(stored, "SCRAM-SHA-256$"), "$")
	iter, saltB64, _ := strings.Cut(head, ":")
	n, _ := strconv.Atoi(iter)
	salt, err := base64.StdEncoding.DecodeString(saltB64)
	if err != nil || n == 0 {
		t.Fatalf("the server stored %q, no SCRAM verifier", stored)
	}
	if got, err := scramVerifierWithSalt(password, salt, n); err != nil || got != stored {
		t.Fatalf("verifier %q, %v; the server's is %q", got, err, stored)
	}
}
