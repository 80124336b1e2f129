package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-dev/berth/internal/pgtest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func berthBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("BERTH_BINARY"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "berth-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "berth")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/berth-dev/berth/cmd/agent").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build berth: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// env is one test's database, runtime hosts, provisioner set and agent processes.
type env struct {
	t      *testing.T
	bin    string
	dbURL  string
	setDir string
	pool   *pgxpool.Pool
	hosts  map[string]*runtimeHost // by name
}

// runtimeHost stands in for a runtime host of the static pool: a real HTTP server answering
// the health endpoint, healthy until told otherwise.
type runtimeHost struct {
	url     string
	slots   int
	healthy atomic.Bool
}

// newEnv starts one runtime host per entry of slots (name -> slot count) and writes a static
// provisioner set "pool" of them.
func newEnv(t *testing.T, slots map[string]int) *env {
	t.Helper()
	e := &env{t: t, bin: berthBinary(t), dbURL: pgtest.New(t), setDir: t.TempDir(), hosts: map[string]*runtimeHost{}}
	names := make([]string, 0, len(slots))
	for name := range slots {
		names = append(names, name)
	}
	sort.Strings(names)
	var runtimes []map[string]any
	for _, name := range names {
		h := &runtimeHost{slots: slots[name]}
		h.healthy.Store(true)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/ping" && h.healthy.Load() {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		t.Cleanup(srv.Close)
		h.url = srv.URL
		e.hosts[name] = h
		runtimes = append(runtimes, map[string]any{"host": h.url, "slots": h.slots, "data_dir": "/mnt/data"})
	}
	set, err := json.Marshal(map[string]any{"pool": map[string]any{"type": "static", "spec": map[string]any{"runtimes": runtimes}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.setDir, "set.json"), set, 0o600); err != nil {
		t.Fatal(err)
	}
	e.berth("migrate")
	pool, err := pgxpool.New(context.Background(), e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	return e
}

func (e *env) cmdEnv() []string {
	return append(os.Environ(), "BERTH_DATABASE_URL="+e.dbURL, "BERTH_PROVISIONER_SET_JSON=", "BERTH_DEFAULT_PROVISIONER=")
}

// berth runs a CLI command to completion and returns its stdout; a failure fails the test.
func (e *env) berth(args ...string) string {
	e.t.Helper()
	out, stderr, err := e.tryBerth(args...)
	if err != nil {
		e.t.Fatalf("berth %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

func (e *env) tryBerth(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = e.cmdEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// agent is a running `berth run`.
type agent struct {
	cmd  *exec.Cmd
	logs *bytes.Buffer
	done chan error
}

func (e *env) startAgent(extra ...string) *agent {
	e.t.Helper()
	args := append([]string{"run",
		"--provisioners", filepath.Join(e.setDir, "set.json"),
		"--agent-id", "e2e-agent",
		"--poll-interval", "200ms",
		"--backoff-base", "100ms",
		"--backoff-max", "1s",
		"--capacity-retry", "500ms",
		"--log-level", "debug",
		"--http-addr", "127.0.0.1:0",
		"--health-interval", "1s",
		"--capacity-interval", "1s",
	}, extra...)
	cmd := exec.Command(e.bin, args...)
	cmd.Env = e.cmdEnv()
	logs := &bytes.Buffer{}
	out := &lockedWriter{w: logs}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	a := &agent{cmd: cmd, logs: logs, done: make(chan error, 1)}
	go func() { a.done <- cmd.Wait() }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-a.done
		if e.t.Failed() {
			e.t.Log("agent log follows")
			for _, line := range strings.Split(a.logs.String(), "\n") {
				e.t.Log("agent: " + line)
			}
		}
	})
	return a
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (a *agent) kill9(t *testing.T) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	a.done <- nil
}

// stop sends SIGTERM and requires a clean exit within the agent's shutdown bound.
func (a *agent) stop(t *testing.T) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		a.done <- err
		if err != nil {
			t.Fatalf("agent exited with %v after SIGTERM", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("agent did not stop within 45s of SIGTERM")
	}
}

// resourceJSON is the CLI's -o json shape.
type resourceJSON struct {
	ID                 string         `json:"id"`
	Type               string         `json:"type"`
	Name               string         `json:"name"`
	Owner              string         `json:"owner"`
	Provisioner        string         `json:"provisioner"`
	Status             string         `json:"status"`
	StatusMessage      string         `json:"status_message"`
	Args               map[string]any `json:"args"`
	Config             map[string]any `json:"config"`
	Generation         int64          `json:"generation"`
	ObservedGeneration int64          `json:"observed_generation"`
}

func (e *env) get(id string) resourceJSON {
	e.t.Helper()
	var r resourceJSON
	out := e.berth("resource", "get", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("decode %q: %v", out, err)
	}
	return r
}

// create runs `berth resource create` and returns the id (the last line of stdout).
func (e *env) create(args ...string) string {
	e.t.Helper()
	out := strings.TrimSpace(e.berth(append([]string{"resource", "create", "--type", "runtime"}, args...)...))
	lines := strings.Split(out, "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// eventually polls cond until it holds or the deadline passes.
func (e *env) eventually(what string, within time.Duration, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("%s: not within %s (last: %s)", what, within, last)
}

func (e *env) queryInt(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (e *env) statusCounts() string {
	rows, err := e.pool.Query(context.Background(), "SELECT status, count(*) FROM resources GROUP BY status ORDER BY status")
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
	return strings.Join(parts, " ")
}

// assertNoOverfill checks that no host holds more slots than it has.
func (e *env) assertNoOverfill() {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), "SELECT host, sum(slots)::int FROM slot_reservations GROUP BY host")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var host string
		var used int
		if err := rows.Scan(&host, &used); err != nil {
			e.t.Fatal(err)
		}
		if limit := e.slotsOf(host); used > limit {
			e.t.Fatalf("host %s holds %d slots, more than its %d", host, used, limit)
		}
	}
}

func (e *env) slotsOf(url string) int {
	for _, h := range e.hosts {
		if h.url == url {
			return h.slots
		}
	}
	e.t.Fatalf("%s is not a host of this test", url)
	return 0
}
