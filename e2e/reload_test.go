package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLiveConfiguration changes the provisioner set under a running agent: a host removed
// and another added (file rewritten, then SIGHUP) moves the removed host's runtime to a
// configured one and places new runtimes on the new host, restarting only the workers that
// use the provisioners; an invalid set is refused with one log line and the agent goes on
// with the set it has; a host removed while the agent is down is acted on when it starts.
func TestLiveConfiguration(t *testing.T) {
	e := newEnv(t, map[string]int{"a": 2, "b": 2})
	a, b := e.hosts["a"], e.hosts["b"]
	agent := e.startAgent()

	// One owner's two runtimes are spread: one on a, one on b.
	first := e.create("--name", "first", "--owner", "team", "--arg", "slots=1", "--wait")
	second := e.create("--name", "second", "--owner", "team", "--arg", "slots=1", "--wait")
	onA, onB := first, second
	if e.get(first).Config["host"] == b.url {
		onA, onB = second, first
	}
	if e.get(onA).Config["host"] != a.url || e.get(onB).Config["host"] != b.url {
		t.Fatalf("runtimes not spread over a and b: %v, %v", e.get(first).Config, e.get(second).Config)
	}
	engine := e.engineAddr(agent)
	before := startCounts(t, engine)

	// Remove a, add c with the most room; the file change and SIGHUP both ask for a reload.
	c := e.addHost(t, "c", 5)
	e.writeSet(t, b, c)
	agent.Signal(t, syscall.SIGHUP)
	e.eventually("the agent reloads the set and schedules the pool's runtimes", 20*time.Second, func() (bool, string) {
		logs := agent.logs.String()
		return strings.Contains(logs, `msg="provisioner set reloaded: restarting the provisioners with it"`) &&
			strings.Contains(lineWith(logs, "resources scheduled for reconcile"), "provisioner=pool resources=2"), "no reload in the log yet"
	})
	moved := e.WaitResource(onA, "moved off the removed host", 30*time.Second, func(r resourceJSON) bool {
		return r.Status == "ready" && r.ObservedGeneration == r.Generation && r.Config["host"] == c.url
	})
	if !strings.Contains(moved.StatusMessage, "moved from "+a.url+", which is no longer configured, to "+c.url) {
		t.Errorf("moved runtime's status message = %q, want it to say where it moved", moved.StatusMessage)
	}
	if kept := e.WaitReady(onB, 30*time.Second); kept.Config["host"] != b.url {
		t.Errorf("runtime on b, which stayed, now has config %v", kept.Config)
	}
	if n := e.queryInt("SELECT count(*) FROM slot_reservations WHERE host = $1", a.url); n != 0 {
		t.Errorf("removed host a still holds %d reservations", n)
	}
	third := e.create("--name", "third", "--owner", "other", "--arg", "slots=1", "--wait")
	if got := e.get(third).Config["host"]; got != c.url {
		t.Errorf("a new runtime after the reload went to %v, want the new host c (most free)", got)
	}

	// Only the provisioners and the workers using them restarted.
	after := startCounts(t, engine)
	for _, name := range []string{"database", "http-server", "changelog-pruner", "provisioner-set"} {
		if after[name] != before[name] {
			t.Errorf("%s restarted on reload: start count %d -> %d", name, before[name], after[name])
		}
	}
	for _, name := range []string{"environs", "provisioner", "healthcheck", "environ-check", "capacity"} {
		if after[name] <= before[name] {
			t.Errorf("%s did not restart on reload: start count %d -> %d", name, before[name], after[name])
		}
	}

	// An invalid set (the file alone, no signal) is refused, and the agent keeps running.
	invalid := fmt.Sprintf(`{"pool": {"type": "static", "spec": {"runtimes": [{"host": %q, "slots": 2}, {"host": %q, "slots": 0}]}}}`, b.url, c.url)
	e.writeRaw(t, invalid)
	e.eventually("the invalid set is refused", 20*time.Second, func() (bool, string) {
		return strings.Contains(agent.logs.String(), `msg="provisioner set rejected: the agent keeps running the previous set"`), "no refusal in the log yet"
	})
	refusal := lineWith(agent.logs.String(), "provisioner set rejected")
	column := strings.Index(invalid, `"slots": 0`) + len(`"slots": `) + 1
	want := fmt.Sprintf(`provisioner \"pool\" (static), line 1, column %d: runtimes[1].slots: must be at least 1`, column)
	if !strings.Contains(refusal, want) || !strings.Contains(refusal, "level=ERROR") {
		t.Errorf("refusal = %q, want an error naming the provisioner, where it is and the field (%s)", refusal, want)
	}
	fourth := e.create("--name", "fourth", "--owner", "other", "--arg", "slots=2", "--wait")
	if got := e.get(fourth).Config["host"]; got != c.url {
		t.Errorf("a runtime after the refused set went to %v, want c of the running set", got)
	}
	if n := strings.Count(agent.logs.String(), "provisioner set reloaded"); n != 1 {
		t.Errorf("%d reloads in the log, want the first only", n)
	}
	agent.stop(t)

	// While the agent is down, b is removed too: at start its runtime moves to c.
	e.writeSet(t, c)
	agent = e.startAgent()
	e.WaitResource(onB, "moved off b at startup", 30*time.Second, func(r resourceJSON) bool {
		return r.Status == "ready" && r.ObservedGeneration == r.Generation && r.Config["host"] == c.url
	})
	if !strings.Contains(lineWith(agent.logs.String(), "resources scheduled for reconcile"), "provisioner=pool resources=4") {
		t.Errorf("startup did not schedule the pool's four runtimes; log:\n%s", agent.logs.String())
	}
	e.assertNoOverfill()
	agent.stop(t)
}

// TestLiveConfigurationProvisionerRemovedAndBack removes a provisioner that has a ready
// runtime from the set and puts it back: while it is gone the runtime is kept (not
// deprovisioned, its slot still reserved) and a new runtime naming it fails, saying why;
// once it is back, with the same spec, the failed runtime becomes ready without an args edit.
func TestLiveConfigurationProvisionerRemovedAndBack(t *testing.T) {
	e := newEnv(t, map[string]int{"a": 2, "b": 2})
	a, b := e.hosts["a"], e.hosts["b"]
	static := func(h *runtimeHost) map[string]any {
		return map[string]any{"type": "static", "spec": map[string]any{"runtimes": []map[string]any{
			{"host": h.url, "slots": h.slots, "data_dir": "/mnt/data"},
		}}}
	}
	writeSet := func(set map[string]any) {
		t.Helper()
		raw, err := json.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		e.writeRaw(t, string(raw))
	}
	writeSet(map[string]any{"pool": static(a), "spare": static(b)})
	agent := e.startAgent("--default-provisioner", "pool")

	kept := e.create("--name", "kept", "--owner", "team", "--provisioner", "spare", "--arg", "slots=1", "--wait")
	before := e.get(kept)
	if before.Config["host"] != b.url {
		t.Fatalf("runtime of spare has config %v, want spare's host b", before.Config)
	}

	// spare removed: its runtime is kept as it is.
	writeSet(map[string]any{"pool": static(a)})
	e.eventually("the agent reloads the set without spare", 20*time.Second, func() (bool, string) {
		return strings.Contains(agent.logs.String(), `msg="provisioners removed from the set`), "no removal in the log yet"
	})
	removal := lineWith(agent.logs.String(), "provisioners removed from the set")
	if !strings.Contains(removal, "level=WARN") || !strings.Contains(removal, "provisioners=[spare]") ||
		!strings.Contains(removal, "not deprovisioned") {
		t.Errorf("removal log line = %q, want a warning naming spare and saying its resources are kept", removal)
	}
	late := e.create("--name", "late", "--owner", "team", "--provisioner", "spare", "--arg", "slots=1")
	failed := e.WaitResource(late, "failed: its provisioner is not in the set", 30*time.Second, func(r resourceJSON) bool {
		return r.Status == "error"
	})
	if !strings.Contains(failed.StatusMessage, `provisioner "spare" is not in the provisioner set (known: pool)`) {
		t.Errorf("failed runtime's status message = %q, want it to name the missing provisioner", failed.StatusMessage)
	}
	// The health checker runs every second: give it a few rounds to (not) touch the runtime.
	e.eventually("health checks run with spare gone", 20*time.Second, func() (bool, string) {
		return strings.Count(agent.logs.String(), "its provisioner is not in the provisioner set") >= 3, "fewer than three skipped checks in the log"
	})
	if r := e.get(kept); r.Status != "ready" || r.Generation != before.Generation || r.Config["host"] != b.url {
		t.Errorf("runtime of the removed provisioner changed: status %s, generation %d, config %v", r.Status, r.Generation, r.Config)
	}
	if n := e.queryInt("SELECT count(*) FROM slot_reservations WHERE resource_id = $1 AND host = $2", kept, b.url); n != 1 {
		t.Errorf("runtime of the removed provisioner holds %d reservations on b, want its one", n)
	}
	if strings.Contains(agent.logs.String(), "msg=deprovisioning") {
		t.Errorf("the agent deprovisioned something while spare was gone; log:\n%s", agent.logs.String())
	}

	// spare back, with the same spec: both runtimes are reconciled, the failed one for good.
	writeSet(map[string]any{"pool": static(a), "spare": static(b)})
	back := e.WaitResource(late, "ready once spare is back", 30*time.Second, func(r resourceJSON) bool {
		return r.Status == "ready" && r.ObservedGeneration == r.Generation
	})
	if back.Config["host"] != b.url {
		t.Errorf("runtime retried after spare came back has config %v, want spare's host b", back.Config)
	}
	again := e.WaitResource(kept, "reconciled once spare is back", 30*time.Second, func(r resourceJSON) bool {
		return r.Status == "ready" && r.Generation == before.Generation+1 && r.ObservedGeneration == r.Generation
	})
	if again.Config["host"] != b.url {
		t.Errorf("runtime kept while spare was gone moved to %v, want it to stay on b", again.Config["host"])
	}
	if !strings.Contains(lineWith(agent.logs.String(), "resources scheduled for reconcile"), "provisioner=spare resources=2") {
		t.Errorf("putting spare back did not schedule its two runtimes; log:\n%s", agent.logs.String())
	}
	e.assertNoOverfill()
	agent.stop(t)
}

// addHost starts another runtime host, not yet in the provisioner set.
func (e *env) addHost(t *testing.T, name string, slots int) *runtimeHost {
	t.Helper()
	h := &runtimeHost{slots: slots}
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
	return h
}

// writeSet replaces the provisioner set with a pool of hosts.
func (e *env) writeSet(t *testing.T, hosts ...*runtimeHost) {
	t.Helper()
	var runtimes []map[string]any
	for _, h := range hosts {
		runtimes = append(runtimes, map[string]any{"host": h.url, "slots": h.slots, "data_dir": "/mnt/data"})
	}
	raw, err := json.MarshalIndent(map[string]any{"pool": map[string]any{"type": "static", "spec": map[string]any{"runtimes": runtimes}}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	e.writeRaw(t, string(raw))
}

// writeRaw replaces the set's file as an editor does: a new file renamed over it.
func (e *env) writeRaw(t *testing.T, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(e.SetPath), ".provisioners.json.new")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, e.SetPath); err != nil {
		t.Fatal(err)
	}
}

var servingRE = regexp.MustCompile(`msg="serving health, metrics and engine report".* address=(\S+)`)

// engineAddr is where the agent serves its engine report, from its log.
func (e *env) engineAddr(a *agent) string {
	e.t.Helper()
	var addr string
	e.eventually("the agent serves its engine report", 20*time.Second, func() (bool, string) {
		m := servingRE.FindStringSubmatch(a.logs.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil, "no address in the log yet"
	})
	return addr
}

// startCounts reads how often each manifold's worker has started.
func startCounts(t *testing.T, addr string) map[string]int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/debug/engine")
	if err != nil {
		t.Fatalf("read the engine report: %v", err)
	}
	defer resp.Body.Close()
	var report struct {
		Manifolds map[string]struct {
			StartCount int `json:"start-count"`
		} `json:"manifolds"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		t.Fatalf("decode the engine report: %v", err)
	}
	counts := make(map[string]int, len(report.Manifolds))
	for name, m := range report.Manifolds {
		counts[name] = m.StartCount
	}
	return counts
}

func lineWith(logs, part string) string {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, part) {
			return line
		}
	}
	return ""
}
