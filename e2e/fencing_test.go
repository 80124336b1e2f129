package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// blockingHosts stand in for a static pool's runtime hosts whose health endpoint can be held:
// while held, every probe waits (until released, or its request ends), so an agent's
// attempts sit mid-reconcile, each holding its lease.
type blockingHosts struct {
	mu       sync.Mutex
	released chan struct{} // nil: probes answer at once
}

// hold makes probes wait from now until release.
func (b *blockingHosts) hold() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released = make(chan struct{})
}

// release answers every waiting probe, and the later ones at once.
func (b *blockingHosts) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released != nil {
		close(b.released)
		b.released = nil
	}
}

func (b *blockingHosts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	wait := b.released
	b.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-r.Context().Done():
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// newBlockingEnv is an env on PostgreSQL whose pool "pool" has hosts a and b (10 slots each),
// both answering through probes; probes may take up to a minute, so a held probe outlasts
// the pause of the agent that sent it.
func newBlockingEnv(t *testing.T, probes *blockingHosts) *env {
	t.Helper()
	hosts := map[string]*runtimeHost{}
	var runtimes []map[string]any
	for _, name := range []string{"a", "b"} {
		srv := httptest.NewServer(probes)
		t.Cleanup(srv.Close)
		hosts[name] = &runtimeHost{url: srv.URL, slots: 10}
		hosts[name].healthy.Store(true)
		runtimes = append(runtimes, map[string]any{"host": srv.URL, "slots": 10, "data_dir": "/mnt/data"})
	}
	set := map[string]any{"pool": map[string]any{"type": "static", "spec": map[string]any{
		"runtimes": runtimes, "health_timeout_seconds": 60,
	}}}
	base := e2etest.NewOn(t, e2etest.Postgres, set)
	return &env{Env: base, t: t, dbURL: base.DatabaseURL, pool: base.Pool, hosts: hosts}
}

// fencingSnapshot is everything an agent's writes for the resources would change: each
// row's reconcile outcome (its lease columns aside, which a fresh claim rewrites), its
// history and the slot reservations.
func (e *env) fencingSnapshot() string {
	e.t.Helper()
	var b strings.Builder
	dump := func(query string) {
		rows, err := e.SQL.QueryContext(e.t.Context(), query)
		if err != nil {
			e.t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			e.t.Fatal(err)
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				e.t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		if err := rows.Err(); err != nil {
			e.t.Fatal(err)
		}
	}
	dump(`SELECT id::text, status, status_message, generation, observed_generation, provisioner, state::text, config::text,
	             attempts, next_attempt_at, last_error, ready_at FROM resources ORDER BY id`)
	dump(`SELECT resource_id::text, host, slots, owner, created_at, updated_at FROM slot_reservations ORDER BY resource_id`)
	dump(`SELECT seq, resource_id::text, kind, status, message FROM resource_events ORDER BY seq`)
	return b.String()
}

// queryIDs runs a query answering one text column.
func (e *env) queryIDs(query string, args ...any) []string {
	e.t.Helper()
	rows, err := e.SQL.QueryContext(e.t.Context(), query, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

var takeoverRE = regexp.MustCompile(`took over resource from agent-one after \S+`)

// lostLines counts an agent's "lease lost" refusals.
func lostLines(logs string) int {
	return strings.Count(logs, "lease lost to ")
}

// scrapeCounter reads an unlabelled sum of a counter's series from the agent's /metrics.
func scrapeCounter(t *testing.T, addr, name string) (float64, error) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}

// TestStoppedAgentWritesNothingAfterTakeover: an agent that holds leases mid-attempt is
// stopped (SIGSTOP) for longer than --agent-ttl; a second agent takes its resources over and
// brings every runtime to ready, then resizes two of them and deletes a third, as their
// clients ask meanwhile. When the first agent resumes (SIGCONT), every attempt it had in
// flight carries on with the row it read before the pause, and finds its lease fenced at its
// first write: it logs the loss (the one whose row is gone ends quietly) and none of its
// writes lands: no slot is shrunk back or reserved for the deleted row, and the rows, their
// history and the slot reservations are as the second agent left them. Every runtime
// became ready once per generation, with one reservation, no host over its slots.
func TestStoppedAgentWritesNothingAfterTakeover(t *testing.T) {
	probes := &blockingHosts{}
	e := newBlockingEnv(t, probes)
	probes.hold()
	flags := failoverFlags("1s")
	for i, f := range flags {
		if f == "--concurrency" {
			flags[i+1] = "4"
		}
	}
	one := e.StartAgent("agent-one", flags...)
	e.waitLive("agent-one")

	const n = 6
	e.insertBurst("fenced", n)
	// Each attempt claimed its row (recording the start of provisioning in the same write)
	// and waits in the probe placement needs: none has a write in flight.
	e.eventually("agent-one holds 4 leases, every one mid-attempt", 30*time.Second, func() (bool, string) {
		held := e.queryInt("SELECT count(*) FROM resources WHERE lease_holder = 'agent-one' AND status = 'provisioning'")
		return held == 4, fmt.Sprintf("%d; %s", held, e.statusCounts())
	})
	one.Signal(t, syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			one.Signal(t, syscall.SIGCONT)
		}
	})
	heldIDs := e.queryIDs("SELECT id::text FROM resources WHERE lease_holder = 'agent-one' ORDER BY id")
	held := len(heldIDs)
	probes.release()

	two := e.StartAgent("agent-two", flags...)
	e.waitAllReadyWithoutLeasesOf("agent-one", n, 60*time.Second)
	e.eventually("agent-two logs its takeovers", 10*time.Second, func() (bool, string) {
		got := len(takeoverRE.FindAllString(two.Logs(), -1))
		return got == held, fmt.Sprintf("%d takeover lines, want %d", got, held)
	})
	addr := e.engineAddr(&agent{Agent: two, logs: agentLogs{two}})
	e.eventually("agent-two counts its takeovers", 10*time.Second, func() (bool, string) {
		got, err := scrapeCounter(t, addr, "berth_lease_takeovers_total")
		return err == nil && got == float64(held), fmt.Sprintf("%v (%v), want %d", got, err, held)
	})
	// While agent-one is still stopped, clients resize two of its resources and delete a
	// third; agent-two carries it out.
	resized, deleted := heldIDs[:2], heldIDs[2]
	for _, id := range resized {
		e.berth("resource", "update", id, "--arg", "slots=2", "--wait")
	}
	e.berth("resource", "delete", deleted, "--wait")
	before := e.fencingSnapshot()

	one.Signal(t, syscall.SIGCONT)
	resumed = true
	// One lease-lost line per attempt whose row still exists; the attempt on the deleted row
	// finds it gone and ends without one.
	e.eventually("agent-one's fenced attempts end", 30*time.Second, func() (bool, string) {
		got := lostLines(one.Logs())
		return got >= held-1, fmt.Sprintf("%d lease-lost lines, want %d", got, held-1)
	})
	e.waitLive("agent-one", "agent-two")
	if got := lostLines(one.Logs()); got != held-1 {
		t.Errorf("agent-one logged %d lease losses; want one per attempt it had in flight on a row that exists, %d", got, held-1)
	}
	if after := e.fencingSnapshot(); after != before {
		t.Errorf("agent-one's writes landed after the takeover:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// n runtimes ready at generation 1, two of them again at generation 2.
	ready := e.queryInt("SELECT count(*) FROM resource_events WHERE kind = 'status' AND status = 'ready'")
	if ready != n+len(resized) {
		t.Errorf("%d ready events; want %d: each runtime ready once per generation", ready, n+len(resized))
	}
	for _, id := range resized {
		if got := e.queryInt("SELECT slots FROM slot_reservations WHERE resource_id = $1", id); got != 2 {
			t.Errorf("resized runtime %s holds %d slots; want the 2 it was resized to", id, got)
		}
	}
	if got := e.queryInt("SELECT count(*) FROM slot_reservations WHERE resource_id = $1", deleted); got != 0 {
		t.Errorf("the deleted runtime holds %d reservations; want none", got)
	}
	if got, want := e.queryInt("SELECT count(*) FROM slot_reservations"), n-1; got != want {
		t.Errorf("%d reservations for %d runtimes; want one each", got, want)
	}
	e.assertNoOverfill()
	t.Logf("agent-one held %d leases when stopped; on resuming it logged %d lease losses", held, lostLines(one.Logs()))
}
