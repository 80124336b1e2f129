// Package e2etest is the harness of the end-to-end suites: it gives a test a fresh
// database with Berth's schema (PostgreSQL, or an SQLite file with NewOn), a provisioner set on disk, the real berth binary
// to run CLI commands with, and agents (`berth run`) to start, stop and kill -9, plus polling
// helpers that wait for the database or the CLI to show a state, with a deadline.
//
// The binary is BERTH_BINARY when set (the Makefile sets it); otherwise it is built once per
// test process. The database server is pgtest's.
package e2etest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for Env.SQL
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver, for Env.SQL

	"github.com/berth-dev/berth/internal/pgtest"
)

// CommandTimeout bounds one CLI command (a `resource ... --wait` included).
const CommandTimeout = 5 * time.Minute

// StopTimeout is how long an agent may take to exit after SIGTERM.
const StopTimeout = 45 * time.Second

// pollEvery is how often the wait helpers look again.
const pollEvery = 100 * time.Millisecond

// binary is a berth binary made once per test process, on first use.
type binary struct {
	once sync.Once
	path string
	err  error
}

// get makes the binary with produce the first time, and returns it or fails t.
func (b *binary) get(t testing.TB, produce func() (string, error)) string {
	t.Helper()
	b.once.Do(func() { b.path, b.err = produce() })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

var current, next binary

// Binary returns the berth binary under test: BERTH_BINARY, or one built from this module
// on first use.
func Binary(t testing.TB) string {
	t.Helper()
	return current.get(t, func() (string, error) {
		if p := os.Getenv("BERTH_BINARY"); p != "" {
			return p, nil
		}
		bin, err := build()
		if err != nil {
			return "", fmt.Errorf("%w (or set BERTH_BINARY to a built one)", err)
		}
		return bin, nil
	})
}

// NextBuildTag is the build tag of a berth that knows one schema version more than this
// source does (it embeds one more migration): the next release, in the upgrade tests.
const NextBuildTag = "berth_upgrade_test"

// NextBinary returns berth built from this module with NextBuildTag, once per test
// process: a build whose migrate lands a schema Binary's does not know.
func NextBinary(t testing.TB) string {
	t.Helper()
	return next.get(t, func() (string, error) { return build("-tags", NextBuildTag) })
}

// build builds berth from this module with the go build flags given, into a directory of
// its own, and returns the binary's path.
func build(flags ...string) (string, error) {
	dir, err := os.MkdirTemp("", "berth-e2e-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "berth")
	args := append(append([]string{"build"}, flags...), "-o", bin, "github.com/berth-dev/berth/cmd/agent")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// WithBinary is the Env with its commands and agents run by the berth binary bin instead.
func (e *Env) WithBinary(bin string) *Env {
	other := *e
	other.Bin = bin
	return &other
}

// Store is the kind of database a test runs on.
type Store string

const (
	Postgres Store = "postgres"
	SQLite   Store = "sqlite"
)

// Env is one test's database, provisioner set and berth binary.
type Env struct {
	T testing.TB
	// Bin is the berth binary; DatabaseURL the test's own database, migrated.
	Bin         string
	DatabaseURL string
	Store       Store
	// SetPath is the provisioner set file agents and check-config are given.
	SetPath string
	// SQL is a connection pool on the test database for direct SQL, on either store ($1
	// placeholders); it writes as another program would.
	SQL *sql.DB
	// Pool is a pgx pool on the test database on PostgreSQL; nil on SQLite.
	Pool *pgxpool.Pool
}

// New creates a PostgreSQL database, writes set (a provisioner set, as JSON bytes or any
// value that marshals to one) to a file, checks it with `berth check-config` (so a set the
// binary cannot load fails here, in the binary's own words) and migrates the database.
func New(t testing.TB, set any) *Env {
	t.Helper()
	return NewOn(t, Postgres, set)
}

// NewOn is New on the given store: a fresh PostgreSQL database, or an SQLite file in a
// directory of the test's own.
func NewOn(t testing.TB, store Store, set any) *Env {
	t.Helper()
	var raw []byte
	switch s := set.(type) {
	case []byte:
		raw = s
	case string:
		raw = []byte(s)
	case json.RawMessage:
		raw = s
	default:
		var err error
		if raw, err = json.Marshal(set); err != nil {
			t.Fatalf("encode the provisioner set: %v", err)
		}
	}
	e := &Env{T: t, Bin: Binary(t), Store: store, SetPath: filepath.Join(t.TempDir(), "provisioners.json")}
	driver, dsn := "pgx", ""
	switch store {
	case Postgres:
		e.DatabaseURL = pgtest.New(t)
		dsn = e.DatabaseURL
	case SQLite:
		path := filepath.Join(t.TempDir(), "berth.db")
		e.DatabaseURL = "sqlite://" + path
		driver, dsn = "sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate"
	default:
		t.Fatalf("e2etest: unknown store %q", store)
	}
	if err := os.WriteFile(e.SetPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Berth("check-config", "--provisioners", e.SetPath)
	e.Berth("migrate")
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	e.SQL = db
	if store == Postgres {
		pool, err := pgxpool.New(context.Background(), e.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		e.Pool = pool
	}
	return e
}

// commandEnv is the environment of every berth process: the test database, and none of
// the caller's own provisioner settings.
func (e *Env) commandEnv() []string {
	return append(os.Environ(), "BERTH_DATABASE_URL="+e.DatabaseURL, "BERTH_PROVISIONER_SET_JSON=", "BERTH_DEFAULT_PROVISIONER=")
}

// Berth runs a CLI command to completion and returns its stdout; a failure fails the test.
func (e *Env) Berth(args ...string) string {
	e.T.Helper()
	out, stderr, err := e.TryBerth(args...)
	if err != nil {
		e.T.Fatalf("berth %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// TryBerth runs a CLI command to completion and returns its stdout, stderr and error.
func (e *Env) TryBerth(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Bin, args...)
	cmd.Env = e.commandEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// Resource is a resource as `berth resource get -o json` prints it.
type Resource struct {
	ID                 string         `json:"id"`
	Type               string         `json:"type"`
	Name               string         `json:"name"`
	Owner              string         `json:"owner"`
	Provisioner        string         `json:"provisioner"`
	Status             string         `json:"status"`
	Reason             string         `json:"reason"`
	StatusMessage      string         `json:"status_message"`
	WaitingSince       *time.Time     `json:"waiting_since"`
	LastAttemptAt      *time.Time     `json:"last_attempt_at"`
	Args               map[string]any `json:"args"`
	Config             map[string]any `json:"config"`
	Generation         int64          `json:"generation"`
	ObservedGeneration int64          `json:"observed_generation"`
	Unreadable         string         `json:"unreadable"`
}

// String is the resource's status and message, for failure messages.
func (r Resource) String() string {
	return fmt.Sprintf("%s %s (generation %d, observed %d): %s", r.Status, r.Reason, r.Generation, r.ObservedGeneration, r.StatusMessage)
}

// Get reads a resource through the CLI.
func (e *Env) Get(id string) Resource {
	e.T.Helper()
	var r Resource
	out := e.Berth("resource", "get", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.T.Fatalf("decode %q: %v", out, err)
	}
	return r
}

// Create runs `berth resource create ARGS...` and returns the new id (its last line of
// output).
func (e *Env) Create(args ...string) string {
	e.T.Helper()
	out := strings.TrimSpace(e.Berth(append([]string{"resource", "create"}, args...)...))
	lines := strings.Split(out, "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Eventually polls cond until it holds, and fails the test with cond's last detail when it
// does not within the deadline.
func Eventually(t testing.TB, what string, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, within, detail)
		}
		<-tick.C
	}
}

// Eventually is the package's Eventually for this test.
func (e *Env) Eventually(what string, within time.Duration, cond func() (bool, string)) {
	e.T.Helper()
	Eventually(e.T, what, within, cond)
}

// WaitResource polls resource id through the CLI until cond holds and returns it.
func (e *Env) WaitResource(id, what string, within time.Duration, cond func(Resource) bool) Resource {
	e.T.Helper()
	var last Resource
	e.Eventually(fmt.Sprintf("resource %s %s", id, what), within, func() (bool, string) {
		last = e.Get(id)
		return cond(last), last.String()
	})
	return last
}

// WaitReady waits until resource id is ready at its current generation.
func (e *Env) WaitReady(id string, within time.Duration) Resource {
	e.T.Helper()
	return e.WaitResource(id, "ready", within, func(r Resource) bool {
		return r.Status == "ready" && r.ObservedGeneration == r.Generation
	})
}

// WaitCount waits until the SQL count query answers want; the resources' status counts are
// the failure detail.
func (e *Env) WaitCount(what string, within time.Duration, want int, query string, args ...any) {
	e.T.Helper()
	e.Eventually(what, within, func() (bool, string) {
		got := e.QueryInt(query, args...)
		return got == want, fmt.Sprintf("%d, want %d; statuses %s", got, want, e.StatusCounts())
	})
}

// QueryInt runs a query answering one integer.
func (e *Env) QueryInt(query string, args ...any) int {
	e.T.Helper()
	var n int
	if err := e.SQL.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		e.T.Fatalf("%s: %v", query, err)
	}
	return n
}

// StatusCounts is how many resources are in each status, e.g. "pending=2 ready=5".
func (e *Env) StatusCounts() string {
	rows, err := e.SQL.QueryContext(context.Background(), "SELECT status, count(*) FROM resources GROUP BY status ORDER BY status")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return err.Error()
		}
		parts = append(parts, fmt.Sprintf("%s=%d", s, n))
	}
	if len(parts) == 0 {
		return "no resources"
	}
	return strings.Join(parts, " ")
}

// Agent is a running `berth run`.
type Agent struct {
	cmd  *exec.Cmd
	logs *lockedBuffer
	done chan error
}

// StartAgent starts `berth run` on the test's database and provisioner set with the given
// agent id, an ephemeral HTTP port and debug logs, then args. The agent is killed when the
// test ends; if the test failed, its log is written to the test log.
func (e *Env) StartAgent(id string, args ...string) *Agent {
	e.T.Helper()
	all := append([]string{"run",
		"--provisioners", e.SetPath,
		"--agent-id", id,
		"--log-level", "debug",
		"--http-addr", "127.0.0.1:0",
	}, args...)
	cmd := exec.Command(e.Bin, all...)
	cmd.Env = e.commandEnv()
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		e.T.Fatal(err)
	}
	a := &Agent{cmd: cmd, logs: logs, done: make(chan error, 1)}
	go func() { a.done <- cmd.Wait() }()
	t := e.T
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-a.done
		a.done <- err
		if t.Failed() {
			t.Logf("log of agent pid %d follows", cmd.Process.Pid)
			for _, line := range strings.Split(strings.TrimRight(logs.String(), "\n"), "\n") {
				t.Log("agent: " + line)
			}
		}
	})
	return a
}

// Logs is everything the agent has written so far.
func (a *Agent) Logs() string { return a.logs.String() }

// Kill9 kills the agent with SIGKILL and waits until it is gone.
func (a *Agent) Kill9(t testing.TB) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-a.done
	a.done <- err
}

// Stop sends SIGTERM and requires a clean exit within StopTimeout.
func (a *Agent) Stop(t testing.TB) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	timer := time.NewTimer(StopTimeout)
	defer timer.Stop()
	select {
	case err := <-a.done:
		a.done <- err
		if err != nil {
			t.Fatalf("agent exited with %v after SIGTERM", err)
		}
	case <-timer.C:
		t.Fatalf("agent did not stop within %s of SIGTERM", StopTimeout)
	}
}

// Signal sends sig to the agent (e.g. SIGHUP to reload its provisioner set).
func (a *Agent) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := a.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal the agent: %v", err)
	}
}

// lockedBuffer is an agent's output: written by the process's copier, read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
