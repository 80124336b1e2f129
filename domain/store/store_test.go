package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/sqlite"
	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/internal/pgtest"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestParse(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		kind store.Kind
		path string
	}{
		{"postgres://berth:pw@db:5432/berth?sslmode=disable", store.Postgres, ""},
		{"postgresql://berth@db/berth", store.Postgres, ""},
		{"host=db user=berth dbname=berth", store.Postgres, ""},
		{"sqlite:///var/lib/berth/berth.db", store.SQLite, "/var/lib/berth/berth.db"},
		{"sqlite://berth.db", store.SQLite, filepath.Join(cwd, "berth.db")},
		{"sqlite://data/berth.db", store.SQLite, filepath.Join(cwd, "data", "berth.db")},
		{"sqlite:///tmp/my%20data/berth.db", store.SQLite, "/tmp/my data/berth.db"},
		{"file:berth.db", store.SQLite, filepath.Join(cwd, "berth.db")},
		{"file:/srv/berth.db", store.SQLite, "/srv/berth.db"},
		{"file:///srv/berth.db", store.SQLite, "/srv/berth.db"},
		{"  sqlite:///srv/berth.db ", store.SQLite, "/srv/berth.db"},
	} {
		loc, err := store.Parse(tc.url)
		if err != nil || loc.Kind != tc.kind || loc.Path != tc.path {
			t.Errorf("Parse(%q) = %+v, %v; want %s %q", tc.url, loc, err, tc.kind, tc.path)
		}
	}
	for _, bad := range []string{"", "mysql://berth:s3cret@db/berth", "sqlite://", "sqlite:///srv/berth.db?mode=ro", "file:", "berth.db"} {
		_, err := store.Parse(bad)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", bad)
			continue
		}
		for _, form := range []string{"postgres://", "sqlite:///", "file:"} {
			if !strings.Contains(err.Error(), form) {
				t.Errorf("Parse(%q) error %q does not name the form %s", bad, err, form)
			}
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q) error shows the password: %v", bad, err)
		}
	}
	if _, err := store.Parse("berth.db"); err == nil || !strings.Contains(err.Error(), "sqlite://berth.db") {
		t.Errorf("Parse of a bare file name: %v, want a hint to say sqlite://berth.db", err)
	}
}

func TestLocationStringNamesTheStoreWithoutPassword(t *testing.T) {
	loc, err := store.Parse("sqlite:///srv/berth.db")
	if err != nil || loc.String() != "SQLite file /srv/berth.db" {
		t.Errorf("sqlite location = %q, %v", loc.String(), err)
	}
	loc, err = store.Parse("postgres://berth:s3cret@db/berth")
	if err != nil || loc.String() != "PostgreSQL postgres://berth:xxxxx@db/berth" {
		t.Errorf("postgres location = %q, %v", loc.String(), err)
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:pw@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgresql://u@h/db", "postgresql://u@h/db"},
		{"host=h user=u password=pw dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"sqlite:///srv/berth.db", "sqlite:///srv/berth.db"},
		{"file:berth.db", "file:berth.db"},
		{"mysql://u:pw@h/db", "mysql://u:xxxxx@h/db"},
	} {
		if got := store.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// hostileURLs each hold the secret "s3cret" where a careless or hostile writer might put it;
// each names a server that does not listen (127.0.0.1:1), so opening one fails.
var hostileURLs = []string{
	"postgres://u:Pg/s3cret#1@127.0.0.1:1/berth",
	"postgres://u:123/s3cret@127.0.0.1:1/berth",
	"postgres://u:a?s3cret@127.0.0.1:1/berth?connect_timeout=5",
	"postgres://u:p@s3cret@127.0.0.1:1/berth",
	"postgres://u:s3cret%zz@127.0.0.1:1/berth",
	"postgres://u:s3cret@127.0.0.1:notaport/berth",
	"postgres://u@127.0.0.1:1/berth?password=s3cret&connect_timeout=5",
	"postgres://u@127.0.0.1:1/berth?sslpassword=s3cret&sslmode=disable&connect_timeout=5",
	"postgres://u@127.0.0.1:1/berth?sslpassword=s3cret&sslmode=bogus",
	"postgres://u@127.0.0.1:1/berth?options=-c%20password%3Ds3cret&sslmode=bogus",
	"postgres://u@127.0.0.1:1/berth?password=pw&s3cret=&connect_timeout=5",
	"host=127.0.0.1 port=1 user=u password=s3cret dbname=berth connect_timeout=5",
	"host=127.0.0.1 port=1 password='it\\'s s3cret' sslmode=bogus",
	"host=127.0.0.1 port=1 sslpassword=s3cret sslmode=bogus",
	"host=127.0.0.1 port=1 password='s3cret",
	"host=127.0.0.1 port=1 user= password=s3cret connect_timeout=5",
	"mysql://u:s3cret@127.0.0.1:1/berth",
	"mysql://u:Pg/s3cret@127.0.0.1:1/berth",
	"sqlite:///srv/berth.db?key=s3cret",
}

// No form of a hostile URL shows its secret: not the redacted form, not the location the
// agent logs first, not the error of parsing it or of opening the store.
func TestHostileURLsNeverShowTheSecret(t *testing.T) {
	ctx := testContext(t)
	for _, raw := range hostileURLs {
		if shown := store.Redact(raw); strings.Contains(shown, "s3cret") {
			t.Errorf("Redact(%q) = %q", raw, shown)
		}
		loc, err := store.Parse(raw)
		if err != nil {
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Parse(%q) error shows the secret: %v", raw, err)
			}
			continue
		}
		if strings.Contains(loc.String(), "s3cret") {
			t.Errorf("location of %q = %q", raw, loc)
		}
		db, err := store.Open(ctx, raw, store.Options{})
		if err == nil {
			db.Close()
			t.Errorf("open of %s succeeded, want an error", store.Redact(raw))
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("open of %q: error shows the secret: %v", raw, err)
		}
	}
}

// A password with an unescaped '/' makes the URL read as another host and database: Berth
// refuses it, saying how to write the password, rather than connect there.
func TestPasswordWithSlashIsRefusedWithTheFix(t *testing.T) {
	_, err := store.Parse("postgres://u:Pg/Secret#1@db.example/berth")
	if err == nil || !strings.Contains(err.Error(), "%2F") || strings.Contains(err.Error(), "Secret") {
		t.Fatalf("Parse: %v, want an error saying to write / as %%2F, without the password", err)
	}
}

func TestDefaultPath(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	path, err := store.DefaultPath()
	if want := filepath.Join(state, "berth", "berth.db"); err != nil || path != want {
		t.Fatalf("DefaultPath with XDG_STATE_HOME = %q, %v; want %q", path, err, want)
	}
	if info, err := os.Stat(filepath.Dir(path)); err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
		t.Fatalf("the default database's directory: %v, %v; want it created with mode 0700", info, err)
	}
	url, err := store.DefaultURL()
	if err != nil || url != "sqlite://"+path {
		t.Fatalf("DefaultURL = %q, %v; want sqlite://%s", url, err, path)
	}
	if loc, err := store.Parse(url); err != nil || loc.Path != path {
		t.Fatalf("Parse(DefaultURL) = %+v, %v; want %s", loc, err, path)
	}

	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, xdg := range []string{"", "relative/state"} {
		t.Setenv("XDG_STATE_HOME", xdg)
		path, err := store.DefaultPath()
		if want := filepath.Join(home, ".local", "state", "berth", "berth.db"); err != nil || path != want {
			t.Errorf("DefaultPath with XDG_STATE_HOME %q = %q, %v; want %q", xdg, path, err, want)
		}
	}
}

func TestOpenEachKind(t *testing.T) {
	ctx := testContext(t)
	urls := map[store.Kind]string{
		store.SQLite:   "sqlite://" + filepath.Join(t.TempDir(), "berth.db"),
		store.Postgres: pgtest.New(t),
	}
	for kind, url := range urls {
		db, err := store.Open(ctx, url, store.Options{MaxConns: 2})
		if err != nil {
			t.Fatalf("open %s: %v", kind, err)
		}
		defer db.Close()
		_, err = db.ListResources(ctx, domain.ListFilter{})
		if !store.MissingSchema(err) {
			t.Errorf("%s: listing before migrating: %v, want a missing-schema error", kind, err)
		}
		if err := db.Migrate(ctx); err != nil {
			t.Fatalf("migrate %s: %v", kind, err)
		}
		if err := db.Ping(ctx); err != nil {
			t.Fatalf("ping %s: %v", kind, err)
		}
		if _, err := db.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web"}); err != nil {
			t.Fatalf("%s: create: %v", kind, err)
		}
		_, err = db.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "WEB"})
		if store.MissingSchema(err) || !errors.Is(err, domain.ErrAlreadyExists) {
			t.Errorf("%s: duplicate: %v, want ErrAlreadyExists and no missing-schema error", kind, err)
		}
	}
	if _, err := store.Open(ctx, "mysql://db/berth", store.Options{}); err == nil {
		t.Error("open of an unknown scheme succeeded")
	}
	if _, err := store.Open(ctx, "postgres://berth:s3cret@127.0.0.1:1/berth?connect_timeout=5", store.Options{}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("open of an unreachable server: %v, want an error without the password", err)
	}
}

// Opening an SQLite file that other users can read logs one warning naming the file and the
// fix; a private one logs nothing.
func TestOpenWarnsOfAnSQLiteFileOthersCanRead(t *testing.T) {
	ctx := testContext(t)
	path := filepath.Join(t.TempDir(), "berth.db")
	var logs bytes.Buffer
	opts := store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	db, err := store.Open(ctx, "sqlite://"+path, opts)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if logs.Len() != 0 {
		t.Fatalf("opening a new database logged %q, want nothing", logs.String())
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(ctx, "sqlite://"+path, opts)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], path) ||
		!strings.Contains(lines[0], "chmod 600 "+path) {
		t.Fatalf("opening a database others can read logged %q, want one warning naming %s and chmod 600", logs.String(), path)
	}
}

// The agent's store (Warm) warns of a connection limit of its role below the connections
// the agent may hold, naming the role, both counts and the statement that raises it; another
// store, or one without a logger, checks nothing.
func TestOpenWarnsOfARoleConnectionLimitBelowTheAgents(t *testing.T) {
	ctx := testContext(t)
	dbURL := pgtest.New(t)
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	role := fmt.Sprintf("berth_limited_%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN CONNECTION LIMIT 4`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), `DROP ROLE `+role) })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	q := u.Query()
	q.Set("pool_max_conns", "3")
	u.RawQuery = q.Encode()

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	for _, opts := range []store.Options{{Logger: logger}, {Warm: true}} {
		db, err := store.Open(ctx, u.String(), opts)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	if logs.Len() != 0 {
		t.Fatalf("a store not the agent's logged %q, want nothing", logs.String())
	}
	db, err := store.Open(ctx, u.String(), store.Options{Logger: logger, Warm: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "role="+role) ||
		!strings.Contains(lines[0], "limit=4") || !strings.Contains(lines[0], "agent-connections=5") ||
		!strings.Contains(lines[0], `fix="ALTER ROLE \"`+role+`\" CONNECTION LIMIT 5"`) {
		t.Fatalf("the agent's store logged %q, want one warning naming %s, its limit 4, the agent's 5 connections and the fix", logs.String(), role)
	}
}

func TestLockAgent(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "berth.db")
	release, err := store.LockAgent(url)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	_, err = store.LockAgent(url)
	var running *sqlite.AgentRunningError
	if !errors.As(err, &running) {
		t.Fatalf("second agent on the file: %v, want an AgentRunningError", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if release, err = store.LockAgent(url); err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}

	pg := "postgres://berth@db/berth"
	first, err := store.LockAgent(pg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := store.LockAgent(pg)
	if err != nil {
		t.Fatalf("second agent on PostgreSQL: %v, want none refused", err)
	}
	if first() != nil || second() != nil {
		t.Fatal("release of a PostgreSQL lock failed")
	}
}
