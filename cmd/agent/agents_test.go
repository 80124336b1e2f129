package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
)

// agentKeys are exactly the keys -o json prints for an agent.
var agentKeys = []string{"database_schema_version", "heartbeat_age_seconds", "heartbeat_at", "http_addr", "id", "leader", "leases_held", "live", "provisioners", "schema", "schema_version", "session", "started_at", "version"}

func TestAgentsListsLiveAndSilentAgents(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	if out := c.mustRun("agents"); !strings.Contains(out, "No agents are registered") {
		t.Errorf("berth agents with none registered printed:\n%s", out)
	}
	sessions := map[string]int64{}
	for _, id := range []string{"agent-b", "agent-a"} {
		session, err := c.st.RegisterAgent(ctx, domain.AgentInfo{ID: id, Version: "v1.2.3", HTTPAddr: "10.0.0.5:9090"})
		if err != nil {
			t.Fatal(err)
		}
		sessions[id] = session
	}
	if _, mine, err := c.st.ClaimLeadership(ctx, "agent-a", sessions["agent-a"], time.Minute); err != nil || !mine {
		t.Fatalf("agent-a claims leadership: mine %v, %v", mine, err)
	}
	r, err := c.st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "held", Owner: "acme", Args: map[string]any{"slots": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.st.ClaimResource(ctx, r.ID, "agent-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.st.Pool().Exec(ctx, `UPDATE agents SET heartbeat_at = now() - interval '1 minute' WHERE id = 'agent-b'`); err != nil {
		t.Fatal(err)
	}

	var listed []map[string]any
	decodeOne(t, c.mustRun("agents", "-o", "json"), &listed)
	if len(listed) != 2 {
		t.Fatalf("listed %v; want agent-a and agent-b", listed)
	}
	for _, a := range listed {
		var keys []string
		for k := range a {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, agentKeys) {
			t.Errorf("agent keys %v; want %v", keys, agentKeys)
		}
	}
	a, b := listed[0], listed[1]
	if a["id"] != "agent-a" || a["live"] != true || a["leader"] != true || a["leases_held"] != json.Number("1") ||
		a["version"] != "v1.2.3" || a["http_addr"] != "10.0.0.5:9090" {
		t.Errorf("agent-a listed as %v; want live, leader, holding one lease, v1.2.3 at 10.0.0.5:9090", a)
	}
	if b["id"] != "agent-b" || b["live"] != false || b["leader"] != false {
		t.Errorf("agent-b listed as %v; want not live (silent for a minute, ttl 15s)", b)
	}

	out := c.mustRun("agents")
	for _, want := range []string{"ID", "LIVE", "LEADER", "HEARTBEAT AGE", "LEASES", "VERSION", "HTTP ADDR", "SCHEMA", "AGE"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks column %s:\n%s", want, out)
		}
	}
	if wide := c.mustRun("agents", "-o", "wide"); !strings.Contains(wide, "STARTED") || !strings.Contains(wide, "SESSION") {
		t.Errorf("-o wide lacks STARTED or SESSION:\n%s", wide)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "agent-a") || !strings.Contains(lines[1], "yes   yes") ||
		!strings.HasPrefix(lines[2], "agent-b") || !strings.Contains(lines[2], " no ") {
		t.Errorf("table:\n%s\nwant agent-a live and agent-b not", out)
	}

	// A longer ttl counts agent-b live again.
	decodeOne(t, c.mustRun("agents", "-o", "json", "--agent-ttl", "2m"), &listed)
	if listed[1]["live"] != true {
		t.Errorf("with --agent-ttl 2m agent-b is %v; want live", listed[1])
	}
}

func TestAgentsRefusesABadTTL(t *testing.T) {
	c := newCLI(t)
	for _, ttl := range []string{"0s", "-1s"} {
		_, _, err := c.run("agents", "--agent-ttl", ttl)
		if err == nil || !strings.Contains(err.Error(), "--agent-ttl: must be positive") {
			t.Errorf("berth agents --agent-ttl %s: err = %v; want one naming --agent-ttl", ttl, err)
		}
	}
}

func TestRunChecksTheMembershipFlags(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--heartbeat-interval", "0s"}, "--heartbeat-interval must be positive, got 0s"},
		{[]string{"--heartbeat-interval", "2s", "--agent-ttl", "3s"}, "--agent-ttl (3s) must be at least twice --heartbeat-interval (2s)"},
		{[]string{"--heartbeat-interval", "10s"}, "--agent-ttl (15s) must be at least twice --heartbeat-interval (10s)"},
		{[]string{"--agent-ttl", "24h"}, "--agent-ttl (24h0m0s) must be less than 24h0m0s"},
	} {
		_, _, err := runBerth(testclock.NewClock(time.Now()), append([]string{"run", "--agent-id", "a"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("berth run %v: err = %v; want %q", tc.args, err, tc.want)
		}
	}
}

// An agent whose build knows an older schema than the database's is shown behind, with both
// versions, in the table and in -o json; berth migrate then refuses to run this build's
// migrations, naming both versions and the fix.
func TestAgentsShowAnAgentBehindTheSchemaAndMigrateRefuses(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	v, err := c.st.CheckSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.st.RegisterAgent(ctx, domain.AgentInfo{ID: "agent-a", Version: "v1.2.3", HTTPAddr: "10.0.0.5:9090"}); err != nil {
		t.Fatal(err)
	}
	var listed []map[string]any
	decodeOne(t, c.mustRun("agents", "-o", "json"), &listed)
	if a := listed[0]; a["schema"] != "current" || a["schema_version"] != json.Number(strconv.Itoa(v.Known)) {
		t.Errorf("agent-a listed as %v; want schema current at version %d", a, v.Known)
	}
	if out := c.mustRun("agents"); !strings.Contains(out, " current") {
		t.Errorf("table:\n%s\nwant agent-a's schema current", out)
	}

	c.sql(`INSERT INTO schema_migrations (version) VALUES ($1)`, v.Known+1)
	behind := fmt.Sprintf("behind (knows %d, database %d)", v.Known, v.Known+1)
	if out := c.mustRun("agents"); !strings.Contains(out, behind) {
		t.Errorf("table:\n%s\nwant agent-a's schema %s", out, behind)
	}
	decodeOne(t, c.mustRun("agents", "-o", "json"), &listed)
	if a := listed[0]; a["schema"] != "behind" || a["schema_version"] != json.Number(strconv.Itoa(v.Known)) ||
		a["database_schema_version"] != json.Number(strconv.Itoa(v.Known+1)) {
		t.Errorf("agent-a listed as %v; want schema behind, knowing %d of %d", a, v.Known, v.Known+1)
	}

	_, _, err = c.run("migrate")
	want := fmt.Sprintf("its schema is at version %d, newer than this build of Berth knows (%d)", v.Known+1, v.Known)
	fix := fmt.Sprintf("run berth migrate of a build that knows schema version %d", v.Known+1)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fix) {
		t.Errorf("berth migrate on a newer schema: err = %v; want it to say %q and %q", err, want, fix)
	}
}
