package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// leaderFlags make agents heartbeat, lose liveness and sample capacity quickly enough for a
// test.
var leaderFlags = append([]string{"--capacity-interval", "200ms"}, membershipFlags...)

// leaders lists the ids `berth agents -o json` shows as leader, and the listing.
func (e *env) leaders() ([]string, string) {
	e.t.Helper()
	out := e.berth("agents", "--agent-ttl", "1s", "-o", "json")
	var listed []struct {
		ID     string `json:"id"`
		Live   bool   `json:"live"`
		Leader bool   `json:"leader"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		e.t.Fatalf("berth agents -o json printed %q: %v", out, err)
	}
	var ids []string
	for _, a := range listed {
		if a.Leader {
			ids = append(ids, a.ID)
		}
	}
	return ids, out
}

// waitOneLeader waits until exactly one agent other than not is listed as leader and
// returns it.
func (e *env) waitOneLeader(not string, within time.Duration) string {
	e.t.Helper()
	var leader string
	e.eventually("exactly one leader other than "+not, within, func() (bool, string) {
		ids, out := e.leaders()
		if len(ids) != 1 || ids[0] == not {
			return false, out
		}
		leader = ids[0]
		return true, ""
	})
	return leader
}

// TestLeadership: of three agents on one PostgreSQL exactly one leads; killed with SIGKILL,
// another takes over within the agent ttl and capacity samples keep coming from it.
func TestLeadership(t *testing.T) {
	e := newEnv(t, map[string]int{"a": 4})
	agents := map[string]*e2etest.Agent{}
	for _, id := range []string{"agent-one", "agent-two", "agent-three"} {
		agents[id] = e.StartAgent(id, leaderFlags...)
	}
	e.waitLive("agent-one", "agent-two", "agent-three")
	leader := e.waitOneLeader("", 30*time.Second)

	samples := e.queryInt(`SELECT count(*) FROM capacity_samples`)
	e.eventually("the leader samples capacity", 30*time.Second, func() (bool, string) {
		n := e.queryInt(`SELECT count(*) FROM capacity_samples`)
		return n > samples, fmt.Sprintf("%d samples", n)
	})

	agents[leader].Kill9(t)
	next := e.waitOneLeader(leader, 30*time.Second)
	if next == leader {
		t.Fatalf("the killed agent %s still leads", leader)
	}
	afterTakeover := e.queryInt(`SELECT count(*) FROM capacity_samples`)
	e.eventually("capacity samples keep coming after the takeover", 30*time.Second, func() (bool, string) {
		n := e.queryInt(`SELECT count(*) FROM capacity_samples`)
		return n > afterTakeover, fmt.Sprintf("%d samples, %d at the takeover", n, afterTakeover)
	})
	ids, out := e.leaders()
	if len(ids) != 1 || ids[0] != next {
		t.Errorf("after the takeover the leaders are %v, want %s alone:\n%s", ids, next, out)
	}
	e.eventually("the new leader logs the takeover naming the killed one", 10*time.Second, func() (bool, string) {
		logs := agents[next].Logs()
		return strings.Contains(logs, "leadership gained") && strings.Contains(logs, "previous-leader="+leader), "no such line yet"
	})
}

// TestLeadershipSQLite: the one agent of an SQLite file leads, and its engine report says so.
func TestLeadershipSQLite(t *testing.T) {
	e := newEnvOn(t, e2etest.SQLite, map[string]int{"a": 4})
	a := e.StartAgent("solo", leaderFlags...)
	e.waitLive("solo")
	if leader := e.waitOneLeader("", 30*time.Second); leader != "solo" {
		t.Fatalf("leader %s, want solo", leader)
	}
	addr := e.engineAddr(&agent{Agent: a, logs: agentLogs{a}})
	e.eventually("the engine report shows this agent leading", 30*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/debug/engine")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var report struct {
			Manifolds map[string]struct {
				Report map[string]any `json:"report"`
			} `json:"manifolds"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
			return false, err.Error()
		}
		r := report.Manifolds["leadership"].Report
		return r["leader"] == "solo" && r["mine"] == true && r["since"] != nil, fmt.Sprint(r)
	})
}
