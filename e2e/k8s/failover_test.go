//go:build k8s

package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/e2etest"
)

// failoverAgentTTL is the agents' --agent-ttl in the failover test: a killed agent's leases
// are void this long after its last heartbeat.
const failoverAgentTTL = 3 * time.Second

// failoverFlags give the agents short liveness and leases of ten minutes, so that a runtime
// taken over within the test was taken over because its agent was not live, never because its
// lease expired.
var failoverFlags = []string{
	"--heartbeat-interval", "500ms",
	"--agent-ttl", failoverAgentTTL.String(),
	"--lease-ttl", "10m",
}

// failoverRuntimes is the batch of the failover test: fewer than the three agents'
// concurrency together, so that every one is leased at once, and small enough for the fake
// nodes (a CPU each).
const failoverRuntimes = 18

// TestFailoverMidRollout: three agents on one PostgreSQL share a batch of runtimes whose
// rollouts cannot finish while every node is cordoned. The agent holding the most leases is
// killed with SIGKILL mid-rollout and never restarted; then the nodes take pods again. Every
// runtime is ready within --agent-ttl and a minute of the kill, none is still leased by the
// dead agent, and each has exactly one of each of its objects, created once: the agents that
// take over re-apply the dead agent's Deployments, never create them again.
func TestFailoverMidRollout(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	e := e2etest.New(t, provisionerSet(kubeSpec(t, ns, 240, "")))
	created := watchCreations(t, cs, ns)
	uncordon := cordon(t, cs)

	names := []string{"agent-one", "agent-two", "agent-three"}
	agents := make(map[string]*e2etest.Agent, len(names))
	for _, name := range names {
		agents[name] = startAgentAs(e, name, failoverFlags...)
	}
	waitAgentsLive(t, e, names...)

	if _, err := e.SQL.ExecContext(context.Background(), `
		INSERT INTO resources (type, name, owner, args)
		SELECT 'runtime', 'failover-' || i, 'owner-' || (i % 3), '{"slots": 1}'::jsonb
		FROM generate_series(1, $1) AS i`, failoverRuntimes); err != nil {
		t.Fatal(err)
	}
	var leases map[string][]string
	e.Eventually("every runtime leased with its Deployment created, not rolled out", readyWithin, func() (bool, string) {
		leases = leasesByHolder(t, e)
		leased := 0
		for _, ids := range leases {
			leased += len(ids)
		}
		deployments := created.ofKind("deployment")
		return leased == failoverRuntimes && deployments == failoverRuntimes,
			fmt.Sprintf("%d leased (%v), %d deployments; %s", leased, leaseCounts(leases), deployments, e.StatusCounts())
	})
	victim := mostLeases(leases)
	uids := make(map[string]types.UID, len(leases[victim]))
	for _, id := range leases[victim] {
		d := deploymentOf(t, cs, ns, id)
		if rolledOut(d) {
			t.Fatalf("runtime %s rolled out on cordoned nodes: %+v", id, d.Status)
		}
		uids[id] = d.UID
	}

	agents[victim].Kill9(t)
	killed := time.Now()
	if still := leasesByHolder(t, e)[victim]; len(still) != len(uids) {
		t.Fatalf("%s held %d leases before the kill and %d after it, before any takeover could happen", victim, len(uids), len(still))
	}
	uncordon()

	e.Eventually(fmt.Sprintf("all %d runtimes ready, none leased by %s", failoverRuntimes, victim), failoverAgentTTL+time.Minute, func() (bool, string) {
		ready := e.QueryInt(`SELECT count(*) FROM resources WHERE status = 'ready' AND observed_generation = generation`)
		held := len(leasesByHolder(t, e)[victim])
		return ready == failoverRuntimes && held == 0, fmt.Sprintf("%s; leased by %s: %d", e.StatusCounts(), victim, held)
	})
	t.Logf("%s held %d of %d leases (%v) when killed mid-rollout; all ready %s after the kill",
		victim, len(uids), failoverRuntimes, leaseCounts(leases), time.Since(killed).Round(10*time.Millisecond))

	for _, id := range resourceIDs(t, e) {
		d := deploymentOf(t, cs, ns, id)
		if !rolledOut(d) {
			t.Errorf("runtime %s ready but its deployment is not rolled out: %+v", id, d.Status)
		}
		if uid, ok := uids[id]; ok && d.UID != uid {
			t.Errorf("runtime %s of the killed agent: deployment %s replaced (uid %s, was %s)", id, d.Name, d.UID, uid)
		}
	}
	if twice := created.createdTwice(); len(twice) > 0 {
		t.Errorf("objects created more than once: %s", strings.Join(twice, ", "))
	}
	if n, _ := created.stop(); n != failoverRuntimes*objectsPerRuntime {
		t.Errorf("%d objects created for %d runtimes, want %d", n, failoverRuntimes, failoverRuntimes*objectsPerRuntime)
	}
	listed := listAgents(t, e)
	for _, name := range names {
		want := name != victim
		if a, ok := listed[name]; !ok || a.Live != want || (name == victim && a.LeasesHeld != 0) {
			t.Errorf("agent %s listed as %+v (listed: %t), want live %t", name, a, ok, want)
		}
	}
}

// listedAgent is an agent as `berth agents -o json` prints it.
type listedAgent struct {
	ID         string `json:"id"`
	Live       bool   `json:"live"`
	LeasesHeld int    `json:"leases_held"`
}

// listAgents lists the agents by id, live as the failover test's --agent-ttl says.
func listAgents(t testing.TB, e *e2etest.Env) map[string]listedAgent {
	t.Helper()
	var listed []listedAgent
	out := e.Berth("agents", "--agent-ttl", failoverAgentTTL.String(), "-o", "json")
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("berth agents -o json printed %q: %v", out, err)
	}
	byID := make(map[string]listedAgent, len(listed))
	for _, a := range listed {
		byID[a.ID] = a
	}
	return byID
}

// waitAgentsLive waits until every agent of ids is listed live.
func waitAgentsLive(t testing.TB, e *e2etest.Env, ids ...string) {
	t.Helper()
	e.Eventually(fmt.Sprintf("agents %v live", ids), 30*time.Second, func() (bool, string) {
		listed := listAgents(t, e)
		for _, id := range ids {
			if !listed[id].Live {
				return false, fmt.Sprint(listed)
			}
		}
		return true, ""
	})
}

// leasesByHolder is the ids of the resources whose row names a lease holder, by holder,
// whether or not the holder is still live.
func leasesByHolder(t testing.TB, e *e2etest.Env) map[string][]string {
	t.Helper()
	rows, err := e.SQL.QueryContext(context.Background(),
		`SELECT lease_holder, id::text FROM resources WHERE lease_holder IS NOT NULL ORDER BY lease_holder, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var holder, id string
		if err := rows.Scan(&holder, &id); err != nil {
			t.Fatal(err)
		}
		out[holder] = append(out[holder], id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// mostLeases is the holder with the most leases, the first by name among equals.
func mostLeases(leases map[string][]string) string {
	holders := make([]string, 0, len(leases))
	for h := range leases {
		holders = append(holders, h)
	}
	sort.Strings(holders)
	best := ""
	for _, h := range holders {
		if best == "" || len(leases[h]) > len(leases[best]) {
			best = h
		}
	}
	return best
}

// leaseCounts is how many leases each holder has, for messages.
func leaseCounts(leases map[string][]string) map[string]int {
	out := make(map[string]int, len(leases))
	for h, ids := range leases {
		out[h] = len(ids)
	}
	return out
}

// resourceIDs is every resource's id.
func resourceIDs(t testing.TB, e *e2etest.Env) []string {
	t.Helper()
	rows, err := e.SQL.QueryContext(context.Background(), `SELECT id::text FROM resources ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
