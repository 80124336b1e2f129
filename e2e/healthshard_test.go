package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/berth-dev/berth/internal/e2etest"
)

// shardFlags make agents heartbeat, lose liveness, health-check and sample capacity quickly
// enough for a test.
var shardFlags = append([]string{
	"--health-interval", "2s",
	"--capacity-interval", "200ms",
	"--backoff-base", "100ms",
	"--backoff-max", "1s",
	"--capacity-retry", "500ms",
}, membershipFlags...)

// shardAgent is one agent of the test and where it serves /metrics and /debug/engine.
type shardAgent struct {
	id   string
	proc *e2etest.Agent
	addr string
}

// healthRound is one health-check round as the agent's engine report shows it.
type healthRound struct {
	Seq     int `json:"seq"`
	Agents  int `json:"agents"`
	Share   int `json:"share"`
	Checked int `json:"checked"`
}

// healthReport is the health checker's engine report: the round in progress and the one
// before it.
type healthReport struct {
	Seq  int          `json:"round-seq"`
	Last *healthRound `json:"last-round"`
}

// healthReport reads the agent's health checker report from /debug/engine.
func (a shardAgent) healthReport(t *testing.T) healthReport {
	t.Helper()
	resp, err := http.Get("http://" + a.addr + "/debug/engine")
	if err != nil {
		t.Fatalf("read %s's engine report: %v", a.id, err)
	}
	defer resp.Body.Close()
	var report struct {
		Manifolds map[string]struct {
			Report healthReport `json:"report"`
		} `json:"manifolds"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		t.Fatalf("decode %s's engine report: %v", a.id, err)
	}
	return report.Manifolds["healthcheck"].Report
}

// metric sums the agent's series of the named metric (a counter or a gauge) whose labels
// include labels, and says whether there was any.
func (a shardAgent) metric(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + a.addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s's metrics: %v", a.id, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s's metrics: %v", a.id, err)
	}
	family, ok := families[name]
	if !ok {
		return 0, false
	}
	sum, found := 0.0, false
	for _, m := range family.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		found = true
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum, found
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// startShardAgents starts the agents with shardFlags and waits until they are listed live.
func (e *env) startShardAgents(ids ...string) map[string]shardAgent {
	e.t.Helper()
	agents := map[string]shardAgent{}
	for _, id := range ids {
		a := e.StartAgent(id, shardFlags...)
		agents[id] = shardAgent{id: id, proc: a, addr: e.engineAddr(&agent{Agent: a, logs: agentLogs{a}})}
	}
	e.waitLive(ids...)
	return agents
}

// waitWholeRounds waits until each agent has ended a round, started after since (a round
// seq of the agent's), shared among agents agents, and returns those rounds.
func (e *env) waitWholeRounds(agents map[string]shardAgent, since map[string]int, shared int) map[string]healthRound {
	e.t.Helper()
	rounds := map[string]healthRound{}
	e.eventually(fmt.Sprintf("every agent ends a round shared among %d agents", shared), 60*time.Second, func() (bool, string) {
		for id, a := range agents {
			last := a.healthReport(e.t).Last
			if last == nil || last.Seq <= since[id] || last.Agents != shared {
				return false, fmt.Sprintf("%s's last round: %+v", id, last)
			}
			rounds[id] = *last
		}
		return true, ""
	})
	return rounds
}

// roundSeqs is the round each agent is at.
func roundSeqs(t *testing.T, agents map[string]shardAgent) map[string]int {
	seqs := map[string]int{}
	for id, a := range agents {
		seqs[id] = a.healthReport(t).Seq
	}
	return seqs
}

// checksTotal is the agent's berth_health_checks_total, over every provisioner and result.
func checksTotal(t *testing.T, a shardAgent) float64 {
	n, _ := a.metric(t, "berth_health_checks_total", nil)
	return n
}

var capacityWarningRE = regexp.MustCompile(`msg="capacity warning" .*warning=(\S+)`)

// capacityWarnings counts the capacity warnings the agent logged, by kind.
func capacityWarnings(a shardAgent) map[string]int {
	out := map[string]int{}
	for _, m := range capacityWarningRE.FindAllStringSubmatch(a.proc.Logs(), -1) {
		out[m[1]]++
	}
	return out
}

// TestHealthChecksAreSharedAmongAgents: three agents on one PostgreSQL over N ready
// runtimes check each one once per interval between them, not once each: the sum of their
// berth_health_checks_total grows by about N per round, each agent checks a share of its
// own, and the shares add up to N. The capacity warnings the full pool raises are raised
// once, by the leader. When one agent is killed the other two share all N again.
func TestHealthChecksAreSharedAmongAgents(t *testing.T) {
	const n = 60
	// 63 slots for 60 one-slot runtimes: over 80% of the total used and every host at least
	// 70% full, so both the total and the hosts warnings are raised.
	e := newEnv(t, map[string]int{"a": 21, "b": 21, "c": 21})
	ids := []string{"agent-one", "agent-two", "agent-three"}
	agents := e.startShardAgents(ids...)
	leader := e.waitOneLeader("", 30*time.Second)

	e.insertBurst("shard", n)
	e.WaitCount("every runtime ready", 2*time.Minute, n, `SELECT count(*) FROM resources WHERE status = 'ready' AND observed_generation = generation`)
	e.WaitCount("no lease held", 30*time.Second, 0, `SELECT count(*) FROM resources WHERE lease_holder IS NOT NULL`)

	// Capacity warnings: raised by the leader alone, once each.
	e.eventually("the full pool raises its capacity warnings", 30*time.Second, func() (bool, string) {
		raised := capacityWarnings(agents[leader])
		return raised["total"] > 0 && raised["hosts"] > 0, fmt.Sprintf("%s logged %v", leader, raised)
	})
	// Later samples raise nothing again, anywhere.
	samples := e.queryInt(`SELECT count(*) FROM capacity_samples`)
	e.eventually("more capacity samples", 30*time.Second, func() (bool, string) {
		got := e.queryInt(`SELECT count(*) FROM capacity_samples`)
		return got >= samples+10, fmt.Sprintf("%d samples, %d before", got, samples)
	})
	// Each warning is raised once across the agents, even should leadership have moved
	// meanwhile (a loaded machine): the warning's state is the store's. Only the agent
	// leading now exports the gauge; one that led before dropped it when it stopped leading.
	current := e.waitOneLeader("", 30*time.Second)
	total := map[string]int{}
	for _, id := range ids {
		for kind, n := range capacityWarnings(agents[id]) {
			total[kind] += n
		}
		gauge, exported := agents[id].metric(t, "berth_capacity_warning", map[string]string{"provisioner": "pool", "kind": "total"})
		switch {
		case id == current && gauge != 1:
			t.Errorf("the leader %s exports berth_capacity_warning{kind=total} %v; want 1", id, gauge)
		case id != current && exported:
			t.Errorf("%s, not the leader, exports berth_capacity_warning{kind=total} %v", id, gauge)
		}
	}
	if total["total"] != 1 || total["hosts"] != 1 {
		t.Errorf("capacity warnings logged across the agents: %v; want total and hosts once each", total)
	}
	if current != leader {
		t.Logf("leadership moved from %s to %s during the test", leader, current)
	}

	// Health checks: wait for a whole round of each agent over all n resources and three
	// agents, then measure over whole rounds.
	e.waitWholeRounds(agents, roundSeqs(t, agents), len(ids))
	startSeq, startChecks := map[string]int{}, map[string]float64{}
	for id, a := range agents {
		startSeq[id], startChecks[id] = a.healthReport(t).Seq, checksTotal(t, a)
	}
	const rounds = 4
	e.eventually(fmt.Sprintf("every agent runs %d more rounds", rounds), 60*time.Second, func() (bool, string) {
		for id, a := range agents {
			if seq := a.healthReport(t).Seq; seq < startSeq[id]+rounds {
				return false, fmt.Sprintf("%s at round %d, from %d", id, seq, startSeq[id])
			}
		}
		return true, ""
	})
	perRound := 0.0
	var detail []string
	for _, id := range ids {
		a := agents[id]
		seq, checks := a.healthReport(t).Seq, checksTotal(t, a)
		grew := checks - startChecks[id]
		if grew <= 0 {
			t.Errorf("%s checked nothing over rounds %d to %d", id, startSeq[id], seq)
		}
		perRound += grew / float64(seq-startSeq[id])
		detail = append(detail, fmt.Sprintf("%s: %.0f checks in %d rounds", id, grew, seq-startSeq[id]))
	}
	t.Logf("berth_health_checks_total grew by %.1f per round across the agents (%s) for %d resources", perRound, strings.Join(detail, ", "), n)
	if perRound < 0.5*n || perRound > 1.5*n {
		t.Errorf("the agents' health checks grew by %.1f per round for %d resources; want about %d, not %d", perRound, n, n, len(ids)*n)
	}

	// The shares of one round each, all among the same three agents, add up to n.
	assertShares(t, e.waitWholeRounds(agents, startSeq, len(ids)), n)

	// One agent, not the leader, is killed: once it is not live the other two share all n.
	var victim string
	for _, id := range ids {
		if id != leader {
			victim = id
			break
		}
	}
	agents[victim].proc.Kill9(t)
	delete(agents, victim)
	e.waitListedNotLive(victim)
	assertShares(t, e.waitWholeRounds(agents, roundSeqs(t, agents), len(ids)-1), n)
}

// assertShares checks that each agent's round had a share and that the shares add up to n:
// every resource checked once in a round, none twice, none left out.
func assertShares(t *testing.T, rounds map[string]healthRound, n int) {
	t.Helper()
	total := 0
	for id, r := range rounds {
		if r.Share == 0 || r.Checked != r.Share {
			t.Errorf("%s's round %+v: want a share of its own, all of it checked", id, r)
		}
		total += r.Share
	}
	t.Logf("shares of %d resources among %d agents: %+v", n, len(rounds), rounds)
	if total != n {
		t.Errorf("the agents' shares add up to %d, want %d: %+v", total, n, rounds)
	}
}
