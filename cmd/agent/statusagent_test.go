package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/juju/clock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/sqlite"
)

// fakeAgent is an httptest agent whose engine report names a database.
type fakeAgent struct {
	addr  string
	asked atomic.Int32
}

// startFakeAgent serves /debug/engine with a database worker that reports id (none when
// empty).
func startFakeAgent(t *testing.T, id domain.DatabaseIdentity) *fakeAgent {
	t.Helper()
	dbReport := map[string]any{"consecutive-ping-failures": 0}
	if id.ID != "" {
		dbReport["database-id"], dbReport["database"] = id.ID, id.Where
	}
	body, err := json.Marshal(map[string]any{"state": "started", "manifolds": map[string]any{
		"database": map[string]any{"state": "started", "start-count": 1, "report": dbReport},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a := &fakeAgent{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	a.addr = strings.TrimPrefix(srv.URL, "http://")
	return a
}

// register registers an agent serving on addr and returns its session.
func (c *cli) register(id, addr string) int64 {
	c.t.Helper()
	session, err := c.st.RegisterAgent(context.Background(), domain.AgentInfo{ID: id, Version: "test", HTTPAddr: addr, TTL: time.Minute})
	if err != nil {
		c.t.Fatal(err)
	}
	return session
}

func (c *cli) identity() domain.DatabaseIdentity {
	c.t.Helper()
	id, err := c.st.DatabaseIdentity(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return id
}

// Without flags, berth status asks the leader the agents table names, on the address it
// registered; --agent picks another; the agent's database is the CLI's.
func TestStatusFindsTheLeader(t *testing.T) {
	c := newCLI(t)
	t.Setenv(envAgentAddr, "")
	own := c.identity()
	leader, other := startFakeAgent(t, own), startFakeAgent(t, own)
	session := c.register("berth-a", leader.addr)
	c.register("berth-b", other.addr)
	if _, mine, err := c.st.ClaimLeadership(context.Background(), "berth-a", session, time.Minute); err != nil || !mine {
		t.Fatalf("claim leadership: %v, %v", mine, err)
	}

	out := c.mustRun("status")
	if !strings.HasPrefix(out, "agent: berth-a (the leader) on "+leader.addr+"\ndatabase: "+own.Where+" (id "+own.ID+", the CLI's database)\nengine: started\n") {
		t.Errorf("status without flags printed:\n%s", out)
	}
	if leader.asked.Load() != 1 || other.asked.Load() != 0 {
		t.Errorf("the leader was asked %d times, the other agent %d: want the leader once", leader.asked.Load(), other.asked.Load())
	}

	out = c.mustRun("status", "--agent", "berth-b")
	if !strings.HasPrefix(out, "agent: berth-b on "+other.addr+"\ndatabase: "+own.Where+" (id "+own.ID+", the CLI's database)\n") || other.asked.Load() != 1 {
		t.Errorf("status --agent berth-b printed:\n%s", out)
	}

	_, _, err := c.run("status", "--agent", "berth-c")
	if err == nil || !strings.Contains(err.Error(), `--agent "berth-c": no such agent is registered in `+own.Where+": pass one of berth-a, berth-b") {
		t.Errorf("status --agent berth-c: %v", err)
	}
	_, _, err = c.run("status", "--agent", "berth-b", "--agent-addr", other.addr)
	if err == nil || !strings.Contains(err.Error(), "pass one of them") {
		t.Errorf("status --agent with --agent-addr: %v", err)
	}
}

// With no leader, the agent with the newest heartbeat is asked.
func TestStatusWithoutALeader(t *testing.T) {
	c := newCLI(t)
	t.Setenv(envAgentAddr, "")
	a := startFakeAgent(t, c.identity())
	c.register("berth-a", a.addr)
	out := c.mustRun("status")
	if !strings.HasPrefix(out, "agent: berth-a on "+a.addr+" (no agent leads: the newest heartbeat)\n") || a.asked.Load() != 1 {
		t.Errorf("status printed:\n%s", out)
	}
}

// BERTH_AGENT_ADDR gives the address, --agent-addr beats it, and --agent beats it too.
func TestStatusAgentAddrVariable(t *testing.T) {
	c := newCLI(t)
	own := c.identity()
	byVar, byFlag, byID := startFakeAgent(t, own), startFakeAgent(t, own), startFakeAgent(t, own)
	c.register("berth-a", byID.addr)
	t.Setenv(envAgentAddr, byVar.addr)

	out := c.mustRun("status")
	if !strings.HasPrefix(out, "agent: "+byVar.addr+" (from BERTH_AGENT_ADDR)\ndatabase: "+own.Where+" (id "+own.ID+", the CLI's database)\n") {
		t.Errorf("status with %s printed:\n%s", envAgentAddr, out)
	}
	c.mustRun("status", "--agent-addr", byFlag.addr)
	c.mustRun("status", "--agent", "berth-a")
	if byVar.asked.Load() != 1 || byFlag.asked.Load() != 1 || byID.asked.Load() != 1 {
		t.Errorf("asked: by the variable %d, by --agent-addr %d, by --agent %d: want each once", byVar.asked.Load(), byFlag.asked.Load(), byID.asked.Load())
	}
}

// An agent that reports another database is refused, naming both databases and the fix,
// whether the agents table or an address led to it.
func TestStatusRefusesAnotherDatabase(t *testing.T) {
	c := newCLI(t)
	own := c.identity()
	other := domain.DatabaseIdentity{ID: "0123456789abcdef", Where: "SQLite file /elsewhere/berth.db"}
	stranger := startFakeAgent(t, other)

	t.Setenv(envAgentAddr, stranger.addr)
	_, _, err := c.run("status")
	want := "the agent on " + stranger.addr + " works on another database: SQLite file /elsewhere/berth.db (id 0123456789abcdef), while this CLI uses " +
		own.Where + " (id " + own.ID + "): point the CLI at the agent's database (--database-url or BERTH_DATABASE_URL)"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("status against another database's agent: %v\nwant it to start %q", err, want)
	}

	t.Setenv(envAgentAddr, "")
	c.register("berth-a", stranger.addr)
	_, _, err = c.run("status", "-o", "json")
	if err == nil || !strings.Contains(err.Error(), "works on another database") || !strings.Contains(err.Error(), "another agent serves that address: start berth-a again") {
		t.Errorf("status against a registered address another database's agent serves: %v", err)
	}
}

func TestStatusNoAgentRegistered(t *testing.T) {
	c := newCLI(t)
	t.Setenv(envAgentAddr, "")
	_, _, err := c.run("status")
	want := "no agent is registered in " + c.identity().Where + ": start one with `berth run` (in a clone, `make run`), or pass"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("status with no agent registered: %v, want it to start %q", err, want)
	}
}

// An agent registered at an address nothing answers on: the error says which agent, the
// address, and what to do.
func TestStatusRegisteredAgentDoesNotAnswer(t *testing.T) {
	c := newCLI(t)
	t.Setenv(envAgentAddr, "")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c.register("berth-a", addr)
	_, _, err = c.run("status")
	want := "agent berth-a is live but does not answer on " + addr + ", the address it registered ("
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("status: %v, want it to start %q", err, want)
	}

	// Not live: it has stopped or lost the database, and the error says so.
	if _, err := c.st.Pool().Exec(context.Background(), `UPDATE agents SET heartbeat_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.run("status")
	want = "agent berth-a does not answer on " + addr + ", the address it registered ("
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "its last heartbeat was 1h0m0s ago, so it has stopped or lost the database") {
		t.Errorf("status of an agent that is not live: %v, want it to start %q", err, want)
	}

	c.register("berth-a", "127.0.0.1:0")
	_, _, err = c.run("status")
	if err == nil || !strings.Contains(err.Error(), `agent berth-a registered no address it can be asked on (--http-addr "127.0.0.1:0")`) {
		t.Errorf("status of an agent on a port chosen at start: %v", err)
	}
}

// With an address given, an unreachable database is a warning: status still shows the
// report, which says why the agent cannot reach it either. An agent that reports no
// database is shown with a warning too.
func TestStatusUncheckedDatabase(t *testing.T) {
	clearStatusEnv(t)
	agent := startFakeAgent(t, domain.DatabaseIdentity{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	out, errOut, err := runBerth(clock.WallClock, "status", "--agent-addr", agent.addr, "--database-url", "postgres://berth@"+down+"/berth?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "engine: started") || !strings.HasPrefix(errOut, "warning: not checked that the agent works on this CLI's database: ") {
		t.Errorf("status with the database down printed:\n%s\nstderr:\n%s", out, errOut)
	}

	c := newCLI(t)
	out, errOut, err = c.run("status", "--agent-addr", agent.addr)
	if err != nil {
		t.Fatal(err)
	}
	want := "warning: not checked that the agent on " + agent.addr + " works on this CLI's " + c.identity().Where +
		": it reports no database (its database worker does not say which"
	if !strings.Contains(out, "database: not reported (") || !strings.HasPrefix(errOut, want) {
		t.Errorf("status of an agent that reports no database printed:\n%s\nstderr:\n%s\nwant stderr to start %q", out, errOut, want)
	}
}

// Without a database of its own (no URL, no embedded file), status with an address checks
// nothing and creates no database file.
func TestStatusAddressWithoutADatabase(t *testing.T) {
	clearStatusEnv(t)
	agent := startFakeAgent(t, domain.DatabaseIdentity{ID: "0123456789abcdef", Where: "SQLite file /elsewhere/berth.db"})
	out, errOut, err := runBerth(clock.WallClock, "status", "--agent-addr", agent.addr)
	if err != nil || errOut != "" {
		t.Fatalf("status: %v, stderr %q", err, errOut)
	}
	if !strings.Contains(out, "database: SQLite file /elsewhere/berth.db (id 0123456789abcdef)\n") {
		t.Errorf("status printed:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_STATE_HOME"), "berth", "berth.db")); !os.IsNotExist(err) {
		t.Errorf("status created the embedded database: %v", err)
	}
}

// The embedded database's identity is checked like PostgreSQL's.
func TestStatusEmbeddedDatabase(t *testing.T) {
	clearStatusEnv(t)
	path := filepath.Join(t.TempDir(), "berth.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	own, err := st.DatabaseIdentity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	agent := startFakeAgent(t, own)
	if _, err := st.RegisterAgent(context.Background(), domain.AgentInfo{ID: "solo", HTTPAddr: agent.addr, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	out, _, err := runBerth(clock.WallClock, "status", "--database-url", "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "agent: solo on "+agent.addr+" (no agent leads: the newest heartbeat)\ndatabase: SQLite file "+path+" (id "+own.ID+", the CLI's database)\n") {
		t.Errorf("status printed:\n%s", out)
	}
}

// --agent completes with the registered agents' ids, the leader marked.
func TestStatusCompletesAgents(t *testing.T) {
	c := newCLI(t)
	session := c.register("berth-a", "127.0.0.1:9190")
	c.register("berth-b", "127.0.0.1:9191")
	if _, mine, err := c.st.ClaimLeadership(context.Background(), "berth-a", session, time.Minute); err != nil || !mine {
		t.Fatalf("claim leadership: %v, %v", mine, err)
	}
	out, _, err := runBerth(c.clk, "__complete", "status", "--database-url", c.url, "--agent", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"berth-a\tthe leader, on 127.0.0.1:9190\n", "berth-b\ton 127.0.0.1:9191\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("completion of --agent lacks %q:\n%s", want, out)
		}
	}
}

// Without an address, an unreachable database leaves nothing to find the agent by: the
// error says to pass its address.
func TestStatusDatabaseDownWithoutAnAddress(t *testing.T) {
	clearStatusEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	_, _, err = runBerth(clock.WallClock, "status", "--database-url", "postgres://berth@"+down+"/berth?connect_timeout=2")
	if err == nil || !strings.HasPrefix(err.Error(), "cannot read the agents table to find the agent: ") ||
		!strings.HasSuffix(err.Error(), ": pass the agent's address as --agent-addr or BERTH_AGENT_ADDR") {
		t.Errorf("status with the database down: %v", err)
	}
}
