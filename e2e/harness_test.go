package e2e_test

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-dev/berth/internal/e2etest"
)

// env is one test's database, runtime hosts, provisioner set and agent processes.
type env struct {
	*e2etest.Env
	t     *testing.T
	dbURL string
	pool  *pgxpool.Pool
	hosts map[string]*runtimeHost // by name
}

// runtimeHost stands in for a runtime host of the static pool: a real HTTP server answering
// the health endpoint, healthy until told otherwise.
type runtimeHost struct {
	url     string
	slots   int
	healthy atomic.Bool
	// held, while set, is a channel the host's health endpoint waits on before it answers
	// (see env.holdProbes).
	held atomic.Pointer[chan struct{}]
}

// newEnv starts one runtime host per entry of slots (name -> slot count) and writes a static
// provisioner set "pool" of them; the database is PostgreSQL.
func newEnv(t *testing.T, slots map[string]int) *env {
	t.Helper()
	return newEnvOn(t, e2etest.Postgres, slots)
}

// newEnvOn is newEnv on the given store.
func newEnvOn(t *testing.T, store e2etest.Store, slots map[string]int) *env {
	t.Helper()
	hosts := map[string]*runtimeHost{}
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
			if held := h.held.Load(); held != nil {
				select {
				case <-*held:
				case <-r.Context().Done():
					return
				}
			}
			if r.URL.Path == "/v1/ping" && h.healthy.Load() {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		t.Cleanup(srv.Close)
		h.url = srv.URL
		hosts[name] = h
		runtimes = append(runtimes, map[string]any{"host": h.url, "slots": h.slots, "data_dir": "/mnt/data"})
	}
	set := map[string]any{"pool": map[string]any{"type": "static", "spec": map[string]any{"runtimes": runtimes}}}
	base := e2etest.NewOn(t, store, set)
	return &env{Env: base, t: t, dbURL: base.DatabaseURL, pool: base.Pool, hosts: hosts}
}

// holdProbes makes every host's health endpoint wait before it answers until the returned
// release is called (or the prober gives up), so that an agent placing runtimes holds their
// leases for as long as the test needs, however fast the machine.
func (e *env) holdProbes() (release func()) {
	held := make(chan struct{})
	for _, h := range e.hosts {
		h.held.Store(&held)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			for _, h := range e.hosts {
				h.held.Store(nil)
			}
			close(held)
		})
	}
	e.t.Cleanup(release)
	return release
}

// berth runs a CLI command to completion and returns its stdout; a failure fails the test.
func (e *env) berth(args ...string) string {
	e.t.Helper()
	return e.Berth(args...)
}

func (e *env) tryBerth(args ...string) (string, string, error) {
	return e.TryBerth(args...)
}

// agent is a running `berth run`.
type agent struct {
	*e2etest.Agent
	logs agentLogs
}

type agentLogs struct{ a *e2etest.Agent }

func (l agentLogs) String() string { return l.a.Logs() }

// startAgent runs the agent with timings short enough for tests, then extra flags.
func (e *env) startAgent(extra ...string) *agent {
	e.t.Helper()
	a := e.StartAgent("e2e-agent", append([]string{
		"--poll-interval", "200ms",
		"--backoff-base", "100ms",
		"--backoff-max", "1s",
		"--capacity-retry", "500ms",
		"--health-interval", "1s",
		"--capacity-interval", "1s",
	}, extra...)...)
	return &agent{Agent: a, logs: agentLogs{a}}
}

func (a *agent) kill9(t *testing.T) {
	t.Helper()
	a.Kill9(t)
}

// stop sends SIGTERM and requires a clean exit within the agent's shutdown bound.
func (a *agent) stop(t *testing.T) {
	t.Helper()
	a.Stop(t)
}

// resourceJSON is the CLI's -o json shape.
type resourceJSON = e2etest.Resource

func (e *env) get(id string) resourceJSON {
	e.t.Helper()
	return e.Get(id)
}

// create runs `berth resource create --type runtime` and returns the id.
func (e *env) create(args ...string) string {
	e.t.Helper()
	return e.Create(append([]string{"--type", "runtime"}, args...)...)
}

// eventually polls cond until it holds or the deadline passes.
func (e *env) eventually(what string, within time.Duration, cond func() (bool, string)) {
	e.t.Helper()
	e.Eventually(what, within, cond)
}

func (e *env) queryInt(sql string, args ...any) int {
	e.t.Helper()
	return e.QueryInt(sql, args...)
}

func (e *env) statusCounts() string { return e.StatusCounts() }

// assertNoOverfill checks that no host holds more slots than it has.
func (e *env) assertNoOverfill() {
	e.t.Helper()
	rows, err := e.SQL.QueryContext(e.t.Context(), "SELECT host, CAST(sum(slots) AS integer) FROM slot_reservations GROUP BY host")
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
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
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
