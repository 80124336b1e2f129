package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// TestLifecycle walks resources through create, resize, capacity waits, deletes (through the
// CLI and by direct SQL) and a graceful stop.
func TestLifecycle(t *testing.T) { testLifecycle(t, e2etest.Postgres) }

// TestLifecycleSQLite is TestLifecycle on the embedded store.
func TestLifecycleSQLite(t *testing.T) { testLifecycle(t, e2etest.SQLite) }

func testLifecycle(t *testing.T, store e2etest.Store) {
	e := newEnvOn(t, store, map[string]int{"a": 4, "b": 4})
	a := e.startAgent()

	first := e.create("--name", "first", "--owner", "team-a", "--arg", "slots=2", "--wait")
	r := e.get(first)
	if r.Status != "ready" || r.Provisioner != "pool" || r.ObservedGeneration != 1 {
		t.Fatalf("first after --wait: %+v", r)
	}
	if host, _ := r.Config["host"].(string); r.Config["cpu"] != float64(2) || (host != e.hosts["a"].url && host != e.hosts["b"].url) {
		t.Fatalf("first config: %v", r.Config)
	}

	// A second resource of the same owner is spread to the other host.
	second := e.create("--name", "second", "--owner", "team-a", "--arg", "slots=2", "--wait")
	if h1, h2 := e.get(first).Config["host"], e.get(second).Config["host"]; h1 == h2 {
		t.Fatalf("owner team-a not spread: both on %v", h1)
	}

	// Resize in place: generation 2 goes back through provisioning to ready.
	e.berth("resource", "update", first, "--arg", "slots=4", "--wait")
	r = e.get(first)
	if r.Status != "ready" || r.Generation != 2 || r.ObservedGeneration != 2 || r.Config["cpu"] != float64(4) {
		t.Fatalf("first after resize: %+v", r)
	}

	// One host is now full (first: 4 slots) and the other has 2 free (second: 2 slots), so a
	// 3-slot resource waits for capacity rather than failing.
	waiting := e.create("--name", "waiting", "--owner", "team-b", "--arg", "slots=3")
	e.eventually("waiting resource reports it waits for capacity", 20*time.Second, func() (bool, string) {
		r := e.get(waiting)
		return r.Status == "pending" && strings.Contains(r.StatusMessage, "capacity"), r.Status + ": " + r.StatusMessage
	})

	// Deleting the second resource frees its host; the waiting one is placed there.
	e.berth("resource", "delete", second, "--wait")
	if _, _, err := e.tryBerth("resource", "get", second); err == nil {
		t.Fatal("deleted resource still readable")
	}
	e.eventually("waiting resource becomes ready once capacity frees", 30*time.Second, func() (bool, string) {
		r := e.get(waiting)
		return r.Status == "ready", r.Status + ": " + r.StatusMessage
	})
	e.assertNoOverfill()

	// Invalid args written directly are a permanent error naming the field, not a crash.
	var badID string
	if err := e.SQL.QueryRowContext(context.Background(),
		`INSERT INTO resources (type, name, owner, args) VALUES ('runtime', 'bad', 'team-c', '{"slots": "many"}') RETURNING CAST(id AS text)`).Scan(&badID); err != nil {
		t.Fatal(err)
	}
	e.eventually("bad args become an error naming the field", 20*time.Second, func() (bool, string) {
		r := e.get(badID)
		return r.Status == "error" && strings.Contains(r.StatusMessage, "args.slots"), r.Status + ": " + r.StatusMessage
	})

	// A direct SQL DELETE becomes a delete request: the slots are freed before the row goes.
	if _, err := e.SQL.ExecContext(context.Background(), "DELETE FROM resources WHERE id = $1", first); err != nil {
		t.Fatal(err)
	}
	e.eventually("directly deleted row is deprovisioned and removed", 20*time.Second, func() (bool, string) {
		rows := e.queryInt("SELECT count(*) FROM resources WHERE id = $1", first)
		held := e.queryInt("SELECT count(*) FROM slot_reservations WHERE resource_id = $1", first)
		return rows == 0 && held == 0, fmt.Sprintf("rows=%d reservations=%d", rows, held)
	})

	a.stop(t)
}

// TestCrashRecovery kills the agent with SIGKILL while it works through a batch, restarts
// it, and checks convergence: every resource ready, exactly one reservation each, no host
// overfilled, nothing left provisioning; then deletes everything and finds nothing held.
func TestCrashRecovery(t *testing.T) { testCrashRecovery(t, e2etest.Postgres) }

// TestCrashRecoverySQLite is TestCrashRecovery on the embedded store.
func TestCrashRecoverySQLite(t *testing.T) { testCrashRecovery(t, e2etest.SQLite) }

func testCrashRecovery(t *testing.T, store e2etest.Store) {
	e := newEnvOn(t, store, map[string]int{"a": 100, "b": 100, "c": 100})
	a := e.startAgent("--concurrency", "8")

	// One statement, so the batch lands at once.
	const n = 150
	rowsSQL := make([]string, n)
	for i := range n {
		rowsSQL[i] = fmt.Sprintf(`('runtime', 'crash-%d', 'owner-%d', '{"slots": %d}')`, i+1, (i+1)%7, 1+(i+1)%2)
	}
	if _, err := e.SQL.ExecContext(context.Background(),
		`INSERT INTO resources (type, name, owner, args) VALUES `+strings.Join(rowsSQL, ", ")); err != nil {
		t.Fatal(err)
	}
	e.eventually("agent is mid-batch", 30*time.Second, func() (bool, string) {
		ready := e.queryInt("SELECT count(*) FROM resources WHERE status = 'ready'")
		return ready > 0, e.statusCounts()
	})
	a.kill9(t)

	// Change some args and request some deletes while the agent is down.
	if _, err := e.SQL.ExecContext(context.Background(), `UPDATE resources SET args = '{"slots": 2}' WHERE name IN ('crash-1', 'crash-3', 'crash-5')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SQL.ExecContext(context.Background(), `DELETE FROM resources WHERE name IN ('crash-10', 'crash-11')`); err != nil {
		t.Fatal(err)
	}

	b := e.startAgent("--concurrency", "8")
	e.eventually("all resources converge after the restart", 90*time.Second, func() (bool, string) {
		ready := e.queryInt("SELECT count(*) FROM resources WHERE status = 'ready' AND observed_generation = generation")
		total := e.queryInt("SELECT count(*) FROM resources")
		return ready == n-2 && total == n-2, e.statusCounts()
	})
	if got := e.queryInt(`SELECT count(*) FROM resources r JOIN slot_reservations s ON s.resource_id = r.id
		WHERE s.slots = CAST(r.args->>'slots' AS integer)`); got != n-2 {
		t.Fatalf("%d resources hold a reservation of their size, want %d", got, n-2)
	}
	if got := e.queryInt("SELECT count(*) FROM slot_reservations"); got != n-2 {
		t.Fatalf("%d reservations for %d resources: a slot is leaked or held twice", got, n-2)
	}
	e.assertNoOverfill()

	// Delete everything concurrently through the CLI; nothing may stay held.
	rows, err := e.SQL.QueryContext(context.Background(), "SELECT CAST(id AS text) FROM resources")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		all = append(all, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	var wg sync.WaitGroup
	for i := 0; i < len(all); i += 30 {
		end := min(i+30, len(all))
		wg.Add(1)
		go func(batch []string) {
			defer wg.Done()
			for _, id := range batch {
				if _, stderr, err := e.tryBerth("resource", "delete", id); err != nil {
					t.Errorf("delete %s: %v: %s", id, err, stderr)
				}
			}
		}(all[i:end])
	}
	wg.Wait()
	e.eventually("everything deprovisioned", 60*time.Second, func() (bool, string) {
		left := e.queryInt("SELECT count(*) FROM resources") + e.queryInt("SELECT count(*) FROM slot_reservations")
		return left == 0, e.statusCounts()
	})
	b.stop(t)
}

// TestHealth takes a runtime host down and up again: its resource turns unhealthy (and is
// not deprovisioned), new resources avoid the host, capacity shows it down, and everything
// returns to ready when it recovers; the resource's events keep the story.
func TestHealth(t *testing.T) {
	e := newEnv(t, map[string]int{"a": 4, "b": 4})
	a := e.startAgent()

	onA := e.create("--name", "first", "--owner", "team", "--wait")
	onB := e.create("--name", "second", "--owner", "team", "--wait")
	byHost := map[string]string{e.get(onA).Config["host"].(string): onA, e.get(onB).Config["host"].(string): onB}
	victim := byHost[e.hosts["a"].url]
	if victim == "" {
		t.Fatalf("owner not spread over both hosts: %v", byHost)
	}

	e.hosts["a"].healthy.Store(false)
	e.eventually("the resource on the failing host turns unhealthy", 40*time.Second, func() (bool, string) {
		r := e.get(victim)
		return r.Status == "unhealthy" && strings.Contains(r.StatusMessage, "since"), r.Status + ": " + r.StatusMessage
	})
	if got := e.queryInt("SELECT count(*) FROM slot_reservations WHERE resource_id = $1", victim); got != 1 {
		t.Fatalf("unhealthy resource lost its reservation (%d rows): it must not be deprovisioned", got)
	}
	third := e.create("--name", "third", "--owner", "other", "--wait")
	if host := e.get(third).Config["host"]; host != e.hosts["b"].url {
		t.Fatalf("new resource placed on %v while host a is down", host)
	}
	e.eventually("capacity shows host a down", 20*time.Second, func() (bool, string) {
		out := e.berth("capacity", "-o", "json")
		var report struct {
			Provisioners []struct {
				Hosts []struct {
					Host string `json:"host"`
					Down bool   `json:"down"`
				} `json:"hosts"`
			} `json:"provisioners"`
		}
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			return false, err.Error()
		}
		for _, p := range report.Provisioners {
			for _, h := range p.Hosts {
				if h.Host == e.hosts["a"].url && h.Down {
					return true, ""
				}
			}
		}
		return false, out
	})

	e.hosts["a"].healthy.Store(true)
	e.eventually("the resource recovers", 60*time.Second, func() (bool, string) {
		r := e.get(victim)
		return r.Status == "ready", r.Status + ": " + r.StatusMessage
	})
	events := e.berth("resource", "events", victim)
	for _, want := range []string{"pending", "ready", "unhealthy"} {
		if !strings.Contains(events, want) {
			t.Fatalf("events of %s lack %q:\n%s", victim, want, events)
		}
	}
	a.stop(t)
}

// TestOneAgentPerSQLiteFile starts a second agent on the first one's SQLite file: it refuses
// to start, saying why, while the CLI goes on using the file beside the first agent.
func TestOneAgentPerSQLiteFile(t *testing.T) {
	e := newEnvOn(t, e2etest.SQLite, map[string]int{"a": 4})
	a := e.startAgent()
	path := strings.TrimPrefix(e.DatabaseURL, "sqlite://")
	e.eventually("the agent names its database file in its first log line", 20*time.Second, func() (bool, string) {
		first, _, _ := strings.Cut(a.Logs(), "\n")
		return strings.Contains(first, "starting berth agent") && strings.Contains(first, path), first
	})

	_, stderr, err := e.tryBerth("run", "--provisioners", e.SetPath, "--agent-id", "second", "--http-addr", "127.0.0.1:0")
	if err == nil {
		t.Fatal("a second agent started on the same SQLite file")
	}
	for _, want := range []string{"another berth agent (pid ", "is already running on " + path, "use PostgreSQL to run several"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("second agent's error %q does not say %q", stderr, want)
		}
	}

	id := e.create("--name", "beside-the-agent", "--owner", "team", "--wait")
	if r := e.get(id); r.Status != "ready" {
		t.Fatalf("resource created through the CLI beside the agent: %+v", r)
	}
	a.stop(t)
}
