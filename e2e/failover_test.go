package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// failoverFlags give agents short liveness and a long --lease-ttl, so that a resource taken
// over within the test was taken over because its agent was not live, never because its
// lease expired.
func failoverFlags(agentTTL string) []string {
	return []string{
		"--poll-interval", "200ms",
		"--backoff-base", "100ms",
		"--backoff-max", "1s",
		"--capacity-retry", "500ms",
		"--health-interval", "1s",
		"--capacity-interval", "1s",
		"--concurrency", "8",
		"--heartbeat-interval", "200ms",
		"--agent-ttl", agentTTL,
		"--lease-ttl", "10m",
	}
}

// insertBurst inserts n one-slot runtimes in one statement, so they land at once.
func (e *env) insertBurst(prefix string, n int) {
	e.t.Helper()
	rows := make([]string, n)
	for i := range n {
		rows[i] = fmt.Sprintf(`('runtime', '%s-%d', 'owner-%d', '{"slots": 1}')`, prefix, i+1, i%7)
	}
	if _, err := e.SQL.ExecContext(context.Background(),
		`INSERT INTO resources (type, name, owner, args) VALUES `+strings.Join(rows, ", ")); err != nil {
		e.t.Fatal(err)
	}
}

// waitHoldsLeases waits until the agent holds a resource lease while work is left, so that
// stopping it leaves work of its own for the other agent.
func (e *env) waitHoldsLeases(id string) {
	e.t.Helper()
	e.eventually(id+" holds leases mid-burst", 60*time.Second, func() (bool, string) {
		held := e.queryInt("SELECT count(*) FROM resources WHERE lease_holder = $1", id)
		return held > 0, e.statusCounts()
	})
}

// waitAllReadyWithoutLeasesOf waits until every one of the n resources is ready at its
// generation and none is leased by the agent that left, then checks the slots: one
// reservation per resource, no host over its slots.
func (e *env) waitAllReadyWithoutLeasesOf(gone string, n int, within time.Duration) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("all %d resources ready, none leased by %s", n, gone), within, func() (bool, string) {
		ready := e.queryInt("SELECT count(*) FROM resources WHERE status = 'ready' AND observed_generation = generation")
		held := e.queryInt("SELECT count(*) FROM resources WHERE lease_holder = $1", gone)
		return ready == n && held == 0, fmt.Sprintf("%s; leased by %s: %d", e.statusCounts(), gone, held)
	})
	if got := e.queryInt("SELECT count(*) FROM slot_reservations"); got != n {
		e.t.Fatalf("%d reservations for %d resources: a slot is leaked or held twice", got, n)
	}
	e.assertNoOverfill()
}

// TestFailoverAfterKill9: two agents on one PostgreSQL share a burst of runtimes; one is
// killed with SIGKILL mid-burst and never restarted. The other takes over the dead agent's
// resources, which no change event names again, once the dead agent is not live (its
// leases would last ten minutes), and every runtime becomes ready, no host over its slots.
func TestFailoverAfterKill9(t *testing.T) {
	e := newEnvOn(t, e2etest.Postgres, map[string]int{"a": 250, "b": 250, "c": 250})
	// The hosts hold their health probes until the kill, so that agent-one holds leases
	// when it dies however fast the agents place the burst.
	release := e.holdProbes()
	one := e.StartAgent("agent-one", failoverFlags("1s")...)
	e.StartAgent("agent-two", failoverFlags("1s")...)
	e.waitLive("agent-one", "agent-two")

	const n = 600
	e.insertBurst("failover", n)
	e.waitHoldsLeases("agent-one")
	one.Kill9(t)
	killed := time.Now()
	held := e.queryInt("SELECT count(*) FROM resources WHERE lease_holder = 'agent-one'")
	release()

	e.waitAllReadyWithoutLeasesOf("agent-one", n, 60*time.Second)
	t.Logf("agent-one held %d leases when killed; all %d runtimes ready %s after the kill",
		held, n, time.Since(killed).Round(10*time.Millisecond))
}

// TestGracefulStopHandsWorkOver: of two agents sharing a burst, one stops gracefully while
// it holds leases. Its resignation frees them and logs them as changes, so the other agent
// takes them at once: the agents' liveness bound (a minute here) and the leases' ten
// minutes are never waited for. The hosts hold their health probes until agent-one has
// stopped, so that it holds leases when it stops however fast the agents place the burst.
func TestGracefulStopHandsWorkOver(t *testing.T) {
	e := newEnvOn(t, e2etest.Postgres, map[string]int{"a": 100, "b": 100})
	release := e.holdProbes()
	one := e.StartAgent("agent-one", failoverFlags("1m")...)
	e.StartAgent("agent-two", failoverFlags("1m")...)
	e.waitLive("agent-one", "agent-two")

	const n = 100
	e.insertBurst("handover", n)
	e.waitHoldsLeases("agent-one")
	one.Stop(t)
	stopped := time.Now()
	release()
	if _, ok := e.agents()["agent-one"]; ok {
		t.Errorf("agent-one still listed after a graceful stop: %v", e.agents())
	}

	e.waitAllReadyWithoutLeasesOf("agent-one", n, 30*time.Second)
	t.Logf("all %d runtimes ready %s after the graceful stop", n, time.Since(stopped).Round(10*time.Millisecond))
}
