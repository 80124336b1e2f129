package e2e_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// TestLifecycleControls drives pause, resume, hibernate, wake, retry and label through the
// CLI against a running agent and a static pool, and reads the history back with `resource
// events` and `resource describe`.
func TestLifecycleControls(t *testing.T) { testLifecycleControls(t, e2etest.Postgres) }

// TestLifecycleControlsSQLite is TestLifecycleControls on the embedded store.
func TestLifecycleControlsSQLite(t *testing.T) { testLifecycleControls(t, e2etest.SQLite) }

// controlled is a resource as -o json prints it, with the lifecycle fields.
type controlled struct {
	e2etest.Resource
	Labels     map[string]string `json:"labels"`
	Paused     bool              `json:"paused"`
	Hibernate  bool              `json:"hibernate"`
	Conditions []struct {
		Type   string `json:"type"`
		Status string `json:"status"`
		Reason string `json:"reason"`
	} `json:"conditions"`
}

func (e *env) getControlled(id string) controlled {
	e.t.Helper()
	var r controlled
	out := e.berth("resource", "get", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("decode %q: %v", out, err)
	}
	return r
}

// controlEvents returns the messages of the resource's control events, oldest first.
func (e *env) controlEvents(id string) []string {
	e.t.Helper()
	var events []struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	out := e.berth("resource", "events", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &events); err != nil {
		e.t.Fatalf("decode %q: %v", out, err)
	}
	msgs := []string{}
	for _, ev := range events {
		if ev.Kind == "control" {
			msgs = append(msgs, ev.Message)
		}
	}
	return msgs
}

func (e *env) describeHas(id string, patterns ...string) {
	e.t.Helper()
	out := e.berth("resource", "describe", id)
	for _, p := range patterns {
		if !regexp.MustCompile("(?m)" + p).MatchString(out) {
			e.t.Errorf("describe %s lacks %s:\n%s", id, p, out)
		}
	}
}

func testLifecycleControls(t *testing.T, store e2etest.Store) {
	e := newEnvOn(t, store, map[string]int{"a": 4, "b": 4})
	a := e.startAgent()
	const within = 30 * time.Second

	web := e.create("--name", "web", "--owner", "demo", "--arg", "slots=2", "--label", "team=data", "--wait")

	// Paused, an args change is recorded but not applied: a resource created after it is
	// provisioned meanwhile, and the paused one stays at its old generation.
	if out := e.berth("resource", "pause", web); !strings.Contains(out, "paused: the agent leaves it alone until `berth resource resume "+web+"`") {
		t.Errorf("pause printed %q", out)
	}
	e.berth("resource", "update", web, "--arg", "slots=3")
	e.create("--name", "meanwhile", "--owner", "other", "--wait")
	if r := e.getControlled(web); !r.Paused || r.Generation != 2 || r.ObservedGeneration != 1 || r.Status != "ready" {
		t.Fatalf("paused resource after an args change: %+v", r)
	}
	if out := e.berth("resource", "list", "-l", "team=data"); !regexp.MustCompile(`(?m)^` + web + `\s.*ready \(paused\)`).MatchString(out) {
		t.Errorf("list -l team=data should show web as ready (paused):\n%s", out)
	}
	e.describeHas(web, `^Paused:\s+yes$`, "^Next attempt:\\s+none while paused", `^\s+Synced\s+False\s+Paused\s`)

	e.berth("resource", "resume", web)
	r := e.WaitReady(web, within)
	if r.ObservedGeneration != 2 || r.Config["cpu"] != float64(3) {
		t.Fatalf("resumed resource should be ready with the args changed while paused: %+v %v", r, r.Config)
	}
	host := r.Config["host"]

	// Hibernated, it holds no slots and is counted apart; woken, it is back on its host.
	e.berth("resource", "hibernate", web)
	e.WaitResource(web, "hibernated", within, func(r e2etest.Resource) bool { return r.Status == "hibernated" })
	if n := e.queryInt("SELECT count(*) FROM slot_reservations WHERE resource_id = $1", web); n != 0 {
		t.Errorf("a hibernated runtime still holds %d reservation(s)", n)
	}
	e.eventually("capacity counts the hibernated resource", within, func() (bool, string) {
		out := e.berth("capacity")
		return regexp.MustCompile(`(?m)^pool\s+hibernated: 1$`).MatchString(out), out
	})
	e.describeHas(web, `^Status:\s+hibernated$`, `^Hibernate:\s+yes \(hibernated\)$`,
		"^Next attempt:\\s+none while hibernated: `berth resource wake "+web+"` brings it back$",
		`^\s+Ready\s+False\s+Hibernated\s`, `^\s+Synced\s+True\s+ReconcileSuccess\s`)

	e.berth("resource", "wake", web)
	r = e.WaitReady(web, within)
	if r.Config["host"] != host {
		t.Errorf("woken on %v, want the host it had, %v (which has room)", r.Config["host"], host)
	}

	// Labels: a change is a new generation the agent brings the resource to.
	if out := e.berth("resource", "label", web, "tier=prod"); !strings.Contains(out, "labels now team=data, tier=prod (generation 3)") {
		t.Errorf("label printed %q", out)
	}
	r = e.WaitReady(web, within)
	if r.ObservedGeneration != 3 {
		t.Errorf("relabelled resource: %+v", r)
	}
	if out := e.berth("resource", "list", "-l", "tier=prod", "-o", "json"); !strings.Contains(out, web) || strings.Contains(out, `"meanwhile"`) {
		t.Errorf("list -l tier=prod:\n%s", out)
	}

	// Retry: a resource failed for good is tried again. Paused, the cleared failure is seen
	// as it is; on resume the agent fails it again.
	bad := e.Create("--type", "clickhouse", "--name", "events", "--owner", "demo")
	e.WaitResource(bad, "failed for good", within, func(r e2etest.Resource) bool { return r.Status == "error" })
	e.describeHas(bad, "^Next attempt:\\s+none: failed for good at generation 1; waiting for new args", `^\s+Synced\s+False\s+ReconcileError\s`)
	e.berth("resource", "pause", bad)
	if out := e.berth("resource", "retry", "--all-failed", "-l", "team!=data"); !strings.Contains(out, "resource "+bad+" ") || strings.Contains(out, web) {
		t.Errorf("retry --all-failed printed %q, want only %s", out, bad)
	}
	e.describeHas(bad, `^Last error:\s+<none>$`, `^Attempts:\s+0 failed`, `^Retry requested:\s+\S+ \(`)
	e.berth("resource", "resume", bad)
	e.eventually("the retried resource fails again", within, func() (bool, string) {
		out := e.berth("resource", "describe", bad)
		return regexp.MustCompile(`(?m)^Last error:\s+provisioner "pool" \(static\) does not provision resources of type "clickhouse"`).MatchString(out), out
	})

	// A control that makes no sense is refused, and changes nothing. Paused, the delete is
	// only recorded, so the row is there to be refused.
	e.berth("resource", "pause", web)
	e.berth("resource", "delete", web)
	if out, stderr, err := e.tryBerth("resource", "hibernate", web); err == nil || !strings.Contains(stderr, "being deleted") || out != "" {
		t.Errorf("hibernate of a resource being deleted: %v, stdout %q, stderr %q; want it refused as being deleted", err, out, stderr)
	}
	e.berth("resource", "resume", web)
	e.WaitCount("the resumed delete removes the row", within, 0, "SELECT count(*) FROM resources WHERE id = $1", web)

	want := []string{"paused", "resumed", "hibernate requested", "wake requested", "labels changed: team=data, tier=prod", "paused", "resumed"}
	if got := e.controlEvents(web); !slices.Equal(got, want) {
		t.Errorf("control history of web = %q, want %q", got, want)
	}
	if got, want := e.controlEvents(bad), []string{"paused", "retry requested", "resumed"}; !slices.Equal(got, want) {
		t.Errorf("control history of the retried resource = %q, want %q", got, want)
	}
	a.stop(t)
}
