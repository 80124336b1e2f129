package e2e_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// TestNoRequestWithoutAnEnd follows an operator who names a provisioner no agent serves,
// with the real binary and a running agent: create warns (and succeeds), update
// --provisioner moves the failed resource to a served provisioner where it becomes ready,
// a delete that can never finish is forgotten with delete --force and recorded in the
// history, and delete takes several names and -l, going on past a failure.
func TestNoRequestWithoutAnEnd(t *testing.T) { testNoRequestWithoutAnEnd(t, e2etest.Postgres) }

// TestNoRequestWithoutAnEndSQLite is TestNoRequestWithoutAnEnd on the embedded store.
func TestNoRequestWithoutAnEndSQLite(t *testing.T) { testNoRequestWithoutAnEnd(t, e2etest.SQLite) }

func testNoRequestWithoutAnEnd(t *testing.T, store e2etest.Store) {
	e := newEnvOn(t, store, map[string]int{"a": 4})
	e.startAgent()
	const within = 30 * time.Second

	e.eventually("the agent reports its provisioners", within, func() (bool, string) {
		var agents []struct {
			Provisioners []string `json:"provisioners"`
		}
		out := e.berth("agents", "-o", "json")
		if err := json.Unmarshal([]byte(out), &agents); err != nil {
			return false, out
		}
		return len(agents) == 1 && slices.Equal(agents[0].Provisioners, []string{"pool"}), out
	})
	if out := e.berth("agents"); !strings.Contains(out, "PROVISIONERS") || !strings.Contains(out, "pool") {
		t.Errorf("berth agents does not show the provisioners:\n%s", out)
	}

	// create warns of a provisioner no live agent serves, and succeeds.
	out, stderr, err := e.tryBerth("resource", "create", "--type", "runtime", "--name", "stranded", "--owner", "demo", "--provisioner", "nosuch", "--arg", "slots=1")
	if err != nil {
		t.Fatalf("create with an unserved provisioner: %v (stderr %q)", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	stranded := lines[len(lines)-1]
	for _, want := range []string{`no live agent serves provisioner "nosuch"`, "they serve: pool", "--provisioner NAME"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("create warned %q, want %q in it", stderr, want)
		}
	}
	e.eventually("the resource fails on its unknown provisioner", within, func() (bool, string) {
		r := e.get(stranded)
		return r.Status == "error", r.Status + ": " + r.StatusMessage
	})

	// update --provisioner makes it retryable on a served provisioner.
	_, stderr, err = e.tryBerth("resource", "update", "stranded", "--owner", "demo", "--provisioner", "pool", "--wait", "--timeout", "30s")
	if err != nil {
		t.Fatalf("update --provisioner pool --wait: %v (stderr %q)", err, stderr)
	}
	if r := e.get(stranded); r.Status != "ready" || r.Provisioner != "pool" {
		t.Fatalf("after update --provisioner: %s on %q, want ready on pool", r.Status, r.Provisioner)
	}

	// A delete that can never finish is forgotten with --force.
	lost := e.create("--name", "lost", "--owner", "demo", "--provisioner", "nosuch", "--arg", "slots=1")
	e.eventually("the resource fails on its unknown provisioner", within, func() (bool, string) {
		r := e.get(lost)
		return r.Status == "error", r.Status
	})
	e.berth("resource", "delete", lost)
	e.eventually("the agent tried to deprovision it and failed", within, func() (bool, string) {
		r := e.get(lost)
		return r.Status == "deleting" && strings.Contains(r.StatusMessage, "nosuch"), r.StatusMessage
	})
	var forced string
	e.eventually("delete --force forgets it once no agent holds it", within, func() (bool, string) {
		out, stderr, err := e.tryBerth("resource", "delete", "lost", "--owner", "demo", "--force", "--reason", "nosuch never existed")
		forced = out
		return err == nil, stderr
	})
	if !strings.Contains(forced, "forgotten without deprovisioning") {
		t.Errorf("delete --force printed %q", forced)
	}
	if _, _, err := e.tryBerth("resource", "get", lost); err == nil {
		t.Fatal("the forced delete kept the row")
	}
	if events := e.berth("resource", "events", lost); !strings.Contains(events, "nosuch never existed") || !strings.Contains(events, `provisioner "nosuch"`) {
		t.Errorf("the history of the forgotten resource lacks who, why and what may be left:\n%s", events)
	}

	// delete takes several names and -l; a failure does not stop the others.
	x1 := e.create("--name", "x1", "--owner", "demo")
	x2 := e.create("--name", "x2", "--owner", "demo", "--label", "tier=dev")
	x3 := e.create("--name", "x3", "--owner", "demo", "--label", "tier=dev")
	out, stderr, err = e.tryBerth("resource", "delete", "x1", "nope", "--owner", "demo")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(stderr, `"nope"`) || !strings.Contains(out, x1) {
		t.Errorf("delete x1 nope: %v, stdout %q, stderr %q; want x1 deleted, nope named, a failing exit", err, out, stderr)
	}
	out = e.berth("resource", "delete", "-l", "tier=dev", "--owner", "demo", "--wait", "--timeout", "30s")
	if !strings.Contains(out, x2) || !strings.Contains(out, x3) || strings.Count(out, "deleted") != 2 {
		t.Errorf("delete -l tier=dev --wait printed:\n%s", out)
	}
}

// TestAgentsReportAReloadedSet: a reload of the provisioner set (file rewritten, SIGHUP)
// reaches the agent's row with the next heartbeat, and the agent stays registered through
// it: its membership does not restart with the provisioners, which would give up its leases.
func TestAgentsReportAReloadedSet(t *testing.T) {
	e := newEnvOn(t, e2etest.SQLite, map[string]int{"a": 4})
	// A set of two needs its default named.
	a := e.startAgent("--default-provisioner", "pool")
	const within = 30 * time.Second
	agentProvisioners := func() ([]string, string) {
		var agents []struct {
			Provisioners []string `json:"provisioners"`
		}
		out := e.berth("agents", "-o", "json")
		if err := json.Unmarshal([]byte(out), &agents); err != nil || len(agents) != 1 {
			return nil, out
		}
		return agents[0].Provisioners, out
	}
	e.eventually("the agent reports its provisioners", within, func() (bool, string) {
		got, out := agentProvisioners()
		return slices.Equal(got, []string{"pool"}), out
	})

	host := e.hosts["a"]
	spare := map[string]any{"type": "static", "spec": map[string]any{"runtimes": []map[string]any{{"host": host.url, "slots": 1, "data_dir": "/mnt/spare"}}}}
	pool := map[string]any{"type": "static", "spec": map[string]any{"runtimes": []map[string]any{{"host": host.url, "slots": host.slots, "data_dir": "/mnt/data"}}}}
	raw, err := json.Marshal(map[string]any{"pool": pool, "spare": spare})
	if err != nil {
		t.Fatal(err)
	}
	e.writeRaw(t, string(raw))
	a.Signal(t, syscall.SIGHUP)
	e.eventually("the agent reports the reloaded set", within, func() (bool, string) {
		got, out := agentProvisioners()
		return slices.Equal(got, []string{"pool", "spare"}), out
	})
	if logs := a.logs.String(); strings.Count(logs, `msg=registered`) != 1 || strings.Contains(logs, "resigned") {
		t.Errorf("the agent registered again or resigned on the reload:\n%s", logs)
	}
}
