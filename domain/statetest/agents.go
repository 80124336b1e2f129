package statetest

import (
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// agentTTL is the liveness ttl the membership tests list agents with.
const agentTTL = 15 * time.Second

func mustRegister(t *testing.T, st domain.AgentStore, id string) int64 {
	t.Helper()
	session, err := st.RegisterAgent(testContext(t), domain.AgentInfo{ID: id, Version: "v1.2.3", HTTPAddr: "127.0.0.1:8080"})
	if err != nil {
		t.Fatalf("register agent %s: %v", id, err)
	}
	if session < 1 {
		t.Fatalf("register agent %s: session %d, want at least 1", id, session)
	}
	return session
}

func mustListAgents(t *testing.T, st domain.AgentStore) map[string]domain.Agent {
	t.Helper()
	agents, err := st.ListAgents(testContext(t), agentTTL)
	if err != nil {
		t.Fatalf("list agents: %v", err)
	}
	out := make(map[string]domain.Agent, len(agents))
	for _, a := range agents {
		out[a.ID] = a
	}
	return out
}

// setHeartbeatAgo moves the agent's last heartbeat d into the past, as if it had stopped
// heartbeating d ago.
func setHeartbeatAgo(t *testing.T, b *Backend, id string, d time.Duration) {
	t.Helper()
	if n := mustExec(t, b, `UPDATE agents SET heartbeat_at = $1 WHERE id = $2`, time.Now().Add(-d), id); n != 1 {
		t.Fatalf("set heartbeat of agent %s: %d rows, want 1", id, n)
	}
}

// leaseHolder reads the resource's lease holder directly ("" for none).
func leaseHolder(t *testing.T, b *Backend, id string) string {
	t.Helper()
	var holder string
	if err := b.QueryRow(testContext(t), `SELECT coalesce(lease_holder, '') FROM resources WHERE id = $1`, id).Scan(&holder); err != nil {
		t.Fatalf("read lease of %s: %v", id, err)
	}
	return holder
}

func expectSessionEnded(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, domain.ErrSessionEnded) {
		t.Fatalf("%s: err = %v, want one wrapping ErrSessionEnded", what, err)
	}
}

func testRegisterAndHeartbeatAgents(t *testing.T, b *Backend) {
	ctx := testContext(t)
	for _, id := range []string{"b", "a", "B"} {
		mustRegister(t, b, id)
	}
	agents, err := b.ListAgents(ctx, agentTTL)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range agents {
		ids = append(ids, a.ID)
		if !a.Live || a.Version != "v1.2.3" || a.HTTPAddr != "127.0.0.1:8080" || a.LeasesHeld != 0 {
			t.Errorf("agent %+v; want live, v1.2.3 at 127.0.0.1:8080 with no leases", a)
		}
		if a.HeartbeatAge < 0 || a.HeartbeatAge >= agentTTL {
			t.Errorf("agent %s heartbeat age %s; want a fresh heartbeat", a.ID, a.HeartbeatAge)
		}
		if a.StartedAt.IsZero() || a.HeartbeatAt.Before(a.StartedAt) {
			t.Errorf("agent %s started %s, heartbeat %s; want a heartbeat at or after the start", a.ID, a.StartedAt, a.HeartbeatAt)
		}
	}
	if len(ids) != 3 || ids[0] != "B" || ids[1] != "a" || ids[2] != "b" {
		t.Errorf("agents listed %v; want [B a b], by id in byte order", ids)
	}

	session := mustListAgents(t, b)["a"].Session
	setHeartbeatAgo(t, b, "a", time.Hour)
	if err := b.HeartbeatAgent(ctx, "a", session); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if a := mustListAgents(t, b)["a"]; !a.Live || a.HeartbeatAge >= agentTTL {
		t.Errorf("after a heartbeat agent a is %+v; want live with a fresh heartbeat", a)
	}
	// Another State on the same database (another agent, or the CLI) sees the same.
	if a := mustListAgents(t, b.Reopen(t))["a"]; !a.Live || a.Session != session {
		t.Errorf("another State lists agent a as %+v; want live at session %d", a, session)
	}
}

func testAgentSessionMovesOn(t *testing.T, b *Backend) {
	ctx := testContext(t)
	first := mustRegister(t, b, "a")
	setHeartbeatAgo(t, b, "a", time.Hour)
	started := mustListAgents(t, b)["a"].StartedAt
	second := mustRegister(t, b, "a")
	if second <= first {
		t.Fatalf("second registration's session %d; want more than the first's %d", second, first)
	}
	a := mustListAgents(t, b)["a"]
	if a.Session != second || !a.Live || a.StartedAt.Before(started) || a.Version != "v1.2.3" {
		t.Errorf("re-registered agent %+v; want live at session %d, started anew", a, second)
	}
	expectSessionEnded(t, b.HeartbeatAgent(ctx, "a", first), "heartbeat of the older session")
	if err := b.HeartbeatAgent(ctx, "a", second); err != nil {
		t.Fatalf("heartbeat of the newer session: %v", err)
	}

	// The older session resigning gives up nothing of the newer one's.
	r := mustCreate(t, b, runtime("held"))
	if _, err := b.ClaimResource(ctx, r.ID, "a", ttl); err != nil {
		t.Fatal(err)
	}
	expectSessionEnded(t, b.ResignAgent(ctx, "a", first), "resignation of the older session")
	if got := mustListAgents(t, b)["a"]; got.Session != second || got.LeasesHeld != 1 {
		t.Errorf("after the older session resigned agent a is %+v; want session %d still holding its lease", got, second)
	}

	// Sessions keep growing after the row is removed.
	if err := b.ResignAgent(ctx, "a", second); err != nil {
		t.Fatal(err)
	}
	if third := mustRegister(t, b, "a"); third <= second {
		t.Errorf("registration after resigning got session %d; want more than %d", third, second)
	}
}

func testResignAgentGivesUpItsLeases(t *testing.T, b *Backend) {
	ctx := testContext(t)
	sessionA := mustRegister(t, b, "agent-a")
	mustRegister(t, b, "agent-b")
	var mine []string
	for _, name := range []string{"one", "two"} {
		r := mustCreate(t, b, runtime(name))
		if _, err := b.ClaimResource(ctx, r.ID, "agent-a", ttl); err != nil {
			t.Fatal(err)
		}
		mine = append(mine, r.ID)
	}
	theirs := mustCreate(t, b, runtime("theirs"))
	if _, err := b.ClaimResource(ctx, theirs.ID, "agent-b", ttl); err != nil {
		t.Fatal(err)
	}
	// An expired lease is not held.
	expired := mustCreate(t, b, runtime("expired"))
	if _, err := b.ClaimResource(ctx, expired.ID, "agent-a", ttl); err != nil {
		t.Fatal(err)
	}
	mustExec(t, b, `UPDATE resources SET lease_expires_at = $1 WHERE id = $2`, time.Now().Add(-time.Minute), expired.ID)

	agents := mustListAgents(t, b)
	if agents["agent-a"].LeasesHeld != 2 || agents["agent-b"].LeasesHeld != 1 {
		t.Errorf("leases held: agent-a %d, agent-b %d; want 2 and 1 (an expired lease is not held)",
			agents["agent-a"].LeasesHeld, agents["agent-b"].LeasesHeld)
	}

	if err := b.ResignAgent(ctx, "agent-a", sessionA); err != nil {
		t.Fatalf("resign: %v", err)
	}
	agents = mustListAgents(t, b)
	if _, ok := agents["agent-a"]; ok || len(agents) != 1 {
		t.Errorf("after resigning the agents are %v; want agent-b only", agents)
	}
	for _, id := range append(mine, expired.ID) {
		if holder := leaseHolder(t, b, id); holder != "" {
			t.Errorf("resource %s lease held by %q after its holder resigned; want none", id, holder)
		}
		if _, err := b.ClaimResource(ctx, id, "agent-b", ttl); err != nil {
			t.Errorf("agent-b cannot take over %s at once: %v", id, err)
		}
	}
	if holder := leaseHolder(t, b, theirs.ID); holder != "agent-b" {
		t.Errorf("agent-b's own lease is held by %q; want agent-b", holder)
	}
	if got := mustListAgents(t, b)["agent-b"].LeasesHeld; got != 4 {
		t.Errorf("agent-b holds %d leases; want 4", got)
	}
	expectSessionEnded(t, b.HeartbeatAgent(ctx, "agent-a", sessionA), "heartbeat after resigning")
}

func testAgentLivenessAndPruning(t *testing.T, b *Backend) {
	ctx := testContext(t)
	stale := mustRegister(t, b, "stale")
	mustRegister(t, b, "fresh")
	setHeartbeatAgo(t, b, "stale", time.Hour)
	agents := mustListAgents(t, b)
	if a := agents["stale"]; a.Live || a.HeartbeatAge < 59*time.Minute {
		t.Errorf("agent silent for an hour is %+v; want not live, heartbeat about an hour old", a)
	}
	if !agents["fresh"].Live {
		t.Errorf("agent fresh is %+v; want live", agents["fresh"])
	}
	if a, err := b.ListAgents(ctx, 2*time.Hour); err != nil || len(a) != 2 || !a[1].Live {
		t.Errorf("with a 2h ttl the agents are %+v (%v); want stale live", a, err)
	}

	if n, err := b.PruneAgents(ctx, 24*time.Hour); err != nil || n != 0 {
		t.Errorf("prune agents silent for a day = %d, %v; want none", n, err)
	}
	setHeartbeatAgo(t, b, "stale", 25*time.Hour)
	if n, err := b.PruneAgents(ctx, 24*time.Hour); err != nil || n != 1 {
		t.Errorf("prune agents silent for a day = %d, %v; want 1", n, err)
	}
	if agents := mustListAgents(t, b); len(agents) != 1 || !agents["fresh"].Live {
		t.Errorf("after pruning the agents are %v; want fresh only", agents)
	}
	expectSessionEnded(t, b.HeartbeatAgent(ctx, "stale", stale), "heartbeat of a pruned agent")
}

func testAgentInputsAreChecked(t *testing.T, b *Backend) {
	ctx := testContext(t)
	expectField := func(err error, field string) {
		t.Helper()
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("err = %v; want a FieldError on %s", err, field)
		}
	}
	_, err := b.RegisterAgent(ctx, domain.AgentInfo{Version: "v1"})
	expectField(err, "id")
	expectField(b.HeartbeatAgent(ctx, "", 1), "id")
	expectField(b.HeartbeatAgent(ctx, "a", 0), "session")
	expectField(b.ResignAgent(ctx, "a", -1), "session")
	_, err = b.ListAgents(ctx, 0)
	expectField(err, "ttl")
	_, err = b.PruneAgents(ctx, -time.Hour)
	expectField(err, "older_than")
}
