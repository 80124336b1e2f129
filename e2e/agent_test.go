package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

const twoHostSet = `{
  "pool": {
    "type": "static",
    "spec": {
      "runtimes": [
        {"host": "http://rt-a:9091", "slots": 4, "data_dir": "/mnt/data", "audience_url": "http://rt-a:8081"},
        {"host": "http://rt-b:9091", "slots": 4, "data_dir": "/mnt/data", "audience_url": "http://rt-b:8081"}
      ]
    }
  }
}`

var twoHostCapacity = map[string]int{"http://rt-a:9091": 4, "http://rt-b:9091": 4}

// TestLifecycle walks resources through create, resize, capacity waits, deletes (through the
// CLI and by direct SQL) and a graceful stop.
func TestLifecycle(t *testing.T) {
	e := newEnv(t, twoHostSet)
	a := e.startAgent()

	first := e.create("--name", "first", "--owner", "team-a", "--arg", "slots=2", "--wait")
	r := e.get(first)
	if r.Status != "ready" || r.Provisioner != "pool" || r.ObservedGeneration != 1 {
		t.Fatalf("first after --wait: %+v", r)
	}
	if r.Config["cpu"] != float64(2) || !strings.HasPrefix(r.Config["host"].(string), "http://rt-") {
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
	e.assertNoOverfill(twoHostCapacity)

	// Invalid args written directly are a permanent error naming the field, not a crash.
	var badID string
	if err := e.pool.QueryRow(context.Background(),
		`INSERT INTO resources (type, name, owner, args) VALUES ('runtime', 'bad', 'team-c', '{"slots": "many"}') RETURNING id`).Scan(&badID); err != nil {
		t.Fatal(err)
	}
	e.eventually("bad args become an error naming the field", 20*time.Second, func() (bool, string) {
		r := e.get(badID)
		return r.Status == "error" && strings.Contains(r.StatusMessage, "args.slots"), r.Status + ": " + r.StatusMessage
	})

	// A direct SQL DELETE becomes a delete request: the slots are freed before the row goes.
	if _, err := e.pool.Exec(context.Background(), "DELETE FROM resources WHERE id = $1", first); err != nil {
		t.Fatal(err)
	}
	e.eventually("directly deleted row is deprovisioned and removed", 20*time.Second, func() (bool, string) {
		rows := e.queryInt("SELECT count(*) FROM resources WHERE id = $1", first)
		held := e.queryInt("SELECT count(*) FROM slot_reservations WHERE resource_id = $1", first)
		return rows == 0 && held == 0, fmt.Sprintf("rows=%d reservations=%d", rows, held)
	})

	a.stop(t)
}

const roomySet = `{
  "pool": {
    "type": "static",
    "spec": {
      "runtimes": [
        {"host": "http://rt-a:9091", "slots": 100},
        {"host": "http://rt-b:9091", "slots": 100},
        {"host": "http://rt-c:9091", "slots": 100}
      ]
    }
  }
}`

// TestCrashRecovery kills the agent with SIGKILL while it works through a batch, restarts
// it, and checks convergence: every resource ready, exactly one reservation each, no host
// overfilled, nothing left provisioning; then deletes everything and finds nothing held.
func TestCrashRecovery(t *testing.T) {
	e := newEnv(t, roomySet)
	capacity := map[string]int{"http://rt-a:9091": 100, "http://rt-b:9091": 100, "http://rt-c:9091": 100}
	a := e.startAgent("--concurrency", "8")

	const n = 150
	_, err := e.pool.Exec(context.Background(), `
		INSERT INTO resources (type, name, owner, args)
		SELECT 'runtime', 'crash-' || i, 'owner-' || (i % 7), jsonb_build_object('slots', 1 + i % 2)
		FROM generate_series(1, $1) AS i`, n)
	if err != nil {
		t.Fatal(err)
	}
	e.eventually("agent is mid-batch", 30*time.Second, func() (bool, string) {
		ready := e.queryInt("SELECT count(*) FROM resources WHERE status = 'ready'")
		return ready > 0, e.statusCounts()
	})
	a.kill9(t)

	// Change some args and request some deletes while the agent is down.
	if _, err := e.pool.Exec(context.Background(), `UPDATE resources SET args = '{"slots": 2}' WHERE name IN ('crash-1', 'crash-3', 'crash-5')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(context.Background(), `DELETE FROM resources WHERE name IN ('crash-10', 'crash-11')`); err != nil {
		t.Fatal(err)
	}

	b := e.startAgent("--concurrency", "8")
	e.eventually("all resources converge after the restart", 90*time.Second, func() (bool, string) {
		ready := e.queryInt("SELECT count(*) FROM resources WHERE status = 'ready' AND observed_generation = generation")
		total := e.queryInt("SELECT count(*) FROM resources")
		return ready == n-2 && total == n-2, e.statusCounts()
	})
	if got := e.queryInt(`SELECT count(*) FROM resources r JOIN slot_reservations s ON s.resource_id = r.id
		WHERE s.slots = (r.args->>'slots')::int`); got != n-2 {
		t.Fatalf("%d resources hold a reservation of their size, want %d", got, n-2)
	}
	if got := e.queryInt("SELECT count(*) FROM slot_reservations"); got != n-2 {
		t.Fatalf("%d reservations for %d resources: a slot is leaked or held twice", got, n-2)
	}
	e.assertNoOverfill(capacity)

	// Delete everything concurrently through the CLI; nothing may stay held.
	rows, err := e.pool.Query(context.Background(), "SELECT id::text FROM resources")
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
