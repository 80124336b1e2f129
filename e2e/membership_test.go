package e2e_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// membershipFlags make agents heartbeat and turn not live quickly enough for a test.
var membershipFlags = []string{"--heartbeat-interval", "200ms", "--agent-ttl", "1s", "--poll-interval", "200ms"}

// listedAgent is an agent as `berth agents -o json` prints it.
type listedAgent struct {
	ID         string `json:"id"`
	Live       bool   `json:"live"`
	LeasesHeld int    `json:"leases_held"`
	Version    string `json:"version"`
	HTTPAddr   string `json:"http_addr"`
	// Schema says how the schema the agent's build knows (SchemaVersion) stands to the
	// database's (DatabaseSchemaVersion): current, behind, ahead or unknown.
	Schema                string `json:"schema"`
	SchemaVersion         int    `json:"schema_version"`
	DatabaseSchemaVersion int    `json:"database_schema_version"`
}

// agents lists the agents by id, live as the agents' own --agent-ttl says.
func (e *env) agents() map[string]listedAgent {
	e.t.Helper()
	var listed []listedAgent
	out := e.berth("agents", "--agent-ttl", "1s", "-o", "json")
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		e.t.Fatalf("berth agents -o json printed %q: %v", out, err)
	}
	byID := make(map[string]listedAgent, len(listed))
	for _, a := range listed {
		byID[a.ID] = a
	}
	return byID
}

// waitLive waits until every id is listed live.
func (e *env) waitLive(ids ...string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("agents %v live", ids), 30*time.Second, func() (bool, string) {
		agents := e.agents()
		for _, id := range ids {
			if !agents[id].Live {
				return false, fmt.Sprint(agents)
			}
		}
		return true, ""
	})
}

// waitListedNotLive waits until id is listed, not live: it stopped heartbeating.
func (e *env) waitListedNotLive(id string) {
	e.t.Helper()
	e.eventually("agent "+id+" listed, not live", 30*time.Second, func() (bool, string) {
		agents := e.agents()
		a, ok := agents[id]
		return ok && !a.Live, fmt.Sprint(agents)
	})
}

// TestMembership: two agents of distinct ids on one PostgreSQL are listed live; a graceful
// stop removes its agent at once; one killed with SIGKILL stays listed and turns not live
// after --agent-ttl.
func TestMembership(t *testing.T) {
	e := newEnv(t, map[string]int{"a": 4})
	one := e.StartAgent("agent-one", membershipFlags...)
	two := e.StartAgent("agent-two", membershipFlags...)
	e.waitLive("agent-one", "agent-two")
	if a := e.agents()["agent-one"]; a.Version == "" || a.HTTPAddr != "127.0.0.1:0" {
		t.Errorf("agent-one listed as %+v; want its version and --http-addr", a)
	}

	// Work is done while both are members.
	id := e.create("--name", "member-work", "--owner", "team-a", "--arg", "slots=1", "--wait")
	if r := e.get(id); r.Status != "ready" {
		t.Fatalf("resource after --wait: %+v", r)
	}

	one.Stop(t)
	agents := e.agents()
	if _, ok := agents["agent-one"]; ok {
		t.Errorf("after a graceful stop agent-one is still listed: %v", agents)
	}
	e.waitLive("agent-two")

	two.Kill9(t)
	if _, ok := e.agents()["agent-two"]; !ok {
		t.Fatalf("agent-two killed with SIGKILL is no longer listed: %v", e.agents())
	}
	e.waitListedNotLive("agent-two")
}

// TestMembershipSQLite: the one agent of an SQLite file is listed live, removed by a graceful
// stop, and, started again and killed with SIGKILL, listed not live after --agent-ttl.
func TestMembershipSQLite(t *testing.T) {
	e := newEnvOn(t, e2etest.SQLite, map[string]int{"a": 4})
	first := e.StartAgent("solo", membershipFlags...)
	e.waitLive("solo")
	first.Stop(t)
	if agents := e.agents(); len(agents) != 0 {
		t.Errorf("after a graceful stop the agents are %v; want none", agents)
	}

	second := e.StartAgent("solo", membershipFlags...)
	e.waitLive("solo")
	second.Kill9(t)
	if _, ok := e.agents()["solo"]; !ok {
		t.Fatalf("agent killed with SIGKILL is no longer listed: %v", e.agents())
	}
	e.waitListedNotLive("solo")
}
