package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// servingLine is the agent's log line that says where it serves /readyz.
var servingLine = regexp.MustCompile(`msg="serving health, metrics and engine report".* address=(\S+)`)

// httpAddr is the address the agent serves /readyz on, from its log.
func (e *env) httpAddr(a *e2etest.Agent) string {
	e.t.Helper()
	var addr string
	e.eventually("the agent serving HTTP", 30*time.Second, func() (bool, string) {
		m := servingLine.FindStringSubmatch(a.Logs())
		if m == nil {
			return false, "no serving line in the log yet"
		}
		addr = m[1]
		return true, ""
	})
	return addr
}

// readiness is /readyz's answer.
type readiness struct {
	code     int
	NotReady []string `json:"not_ready"`
	// Manifolds are the required workers' states, and why one is not started.
	Manifolds map[string]struct {
		State string `json:"state"`
		Error string `json:"error"`
	} `json:"manifolds"`
}

func readyz(addr string) (readiness, error) {
	var r readiness
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	r.code = resp.StatusCode
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// waitUnreadyForSchema waits until the agent at addr answers /readyz 503 with the schema
// guard not started, its error saying fix.
func (e *env) waitUnreadyForSchema(who, addr, fix string) {
	e.t.Helper()
	e.eventually(who+" unready for the schema", 30*time.Second, func() (bool, string) {
		r, err := readyz(addr)
		if err != nil {
			return false, err.Error()
		}
		guard := r.Manifolds["schema-guard"]
		return r.code == http.StatusServiceUnavailable && slices.Contains(r.NotReady, "schema-guard") && strings.Contains(guard.Error, fix),
			fmt.Sprintf("%d %+v", r.code, r)
	})
}

// TestRollingUpgrade runs two builds of Berth on one database through an upgrade, as a
// rolling update does (maxSurge 1: the new pod migrates while the old one still works) and,
// on PostgreSQL, as a rollback does (an old pod starts on the new schema). The new build is
// this source built with e2etest.NextBuildTag: it knows one migration more. Once its migrate
// lands, the old build's agents claim, reconcile and delete nothing: they say so in their
// log, /readyz and berth agents, stay up, and the new build's agent does the work. An SQLite
// file serves one agent, so there the old one is stopped before the new one starts.
func TestRollingUpgrade(t *testing.T) {
	for _, store := range []e2etest.Store{e2etest.Postgres, e2etest.SQLite} {
		t.Run(string(store), func(t *testing.T) { testRollingUpgrade(t, store) })
	}
}

func testRollingUpgrade(t *testing.T, store e2etest.Store) {
	e := newEnvOn(t, store, map[string]int{"a": 10})
	next := e.WithBinary(e2etest.NextBinary(t))
	flags := append([]string{"--backoff-base", "100ms", "--backoff-max", "1s", "--health-interval", "1s"}, membershipFlags...)

	old := e.StartAgent("agent-old", flags...)
	doomed := e.create("--name", "doomed", "--owner", "team-a", "--arg", "slots=1", "--wait")
	held := e.create("--name", "held", "--owner", "team-a", "--arg", "slots=1", "--wait")
	e.berth("resource", "pause", held)
	oldAddr := e.httpAddr(old)
	if r, err := readyz(oldAddr); err != nil || r.code != http.StatusOK {
		t.Fatalf("the old agent before the upgrade: /readyz %+v, %v; want ready", r, err)
	}
	known := e.agents()["agent-old"].SchemaVersion
	if a := e.agents()["agent-old"]; a.Schema != "current" || known < 13 {
		t.Fatalf("the old agent before the upgrade is listed as %+v; want its schema current", a)
	}

	// The new build's pod starts: it migrates first, while the old agent runs.
	next.Berth("migrate")
	schema := e.queryInt(`SELECT max(version) FROM schema_migrations`)
	if schema <= known {
		t.Fatalf("schema version %d after the new build's migrate; want above the old build's %d", schema, known)
	}
	fix := fmt.Sprintf("replace this agent with a build that knows schema version %d", schema)
	e.waitUnreadyForSchema("the old agent", oldAddr, fix)
	if !strings.Contains(old.Logs(), fix) {
		t.Errorf("the old agent's log does not say %q", fix)
	}
	if a := e.agents()["agent-old"]; a.Schema != "behind" || a.SchemaVersion != known || a.DatabaseSchemaVersion != schema || !a.Live {
		t.Errorf("the old agent is listed as %+v; want it live, behind: knowing %d of %d", a, known, schema)
	}
	if out := e.berth("agents"); !strings.Contains(out, fmt.Sprintf("behind (knows %d, database %d)", known, schema)) {
		t.Errorf("berth agents:\n%s\nwant the old agent behind", out)
	}
	// The old build's migrate refuses the newer schema rather than doing nothing silently.
	if _, _, err := e.TryBerth("migrate"); err == nil {
		t.Error("the old build's berth migrate on the newer schema succeeded; want it refused")
	}
	oldLogMark := len(old.Logs())

	// A rollback: an agent of the old build started now does not migrate, and claims
	// nothing either.
	oldAgents := []string{"agent-old"}
	var rollback *e2etest.Agent
	if store == e2etest.Postgres {
		rollback = e.StartAgent("agent-rollback", flags...)
		e.waitUnreadyForSchema("the rolled back agent", e.httpAddr(rollback), fix)
		if !strings.Contains(rollback.Logs(), "not migrating the database: its schema is newer than this build knows") || !strings.Contains(rollback.Logs(), fix) {
			t.Errorf("the rolled back agent's log does not say it left the schema alone, and why:\n%s", rollback.Logs())
		}
		oldAgents = append(oldAgents, "agent-rollback")
	}

	// Work asked for after the new schema landed.
	e.berth("resource", "delete", doomed)
	fresh := e.create("--name", "fresh", "--owner", "team-a", "--arg", "slots=1")

	// Both old agents stay alive, heartbeating well past the requests, and leave it all
	// alone: nothing is claimed, deleted or started.
	inTwoSeconds := map[e2etest.Store]string{
		e2etest.Postgres: `SELECT now() + interval '2 seconds'`,
		e2etest.SQLite:   `SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+2 seconds')`,
	}[store]
	var after any // the database's own time, in its own type
	if err := e.SQL.QueryRowContext(t.Context(), inTwoSeconds).Scan(&after); err != nil {
		t.Fatal(err)
	}
	for _, id := range oldAgents {
		e.WaitCount(id+" heartbeating after the requests", 30*time.Second, 1,
			`SELECT count(*) FROM agents WHERE id = $1 AND heartbeat_at > $2`, id, after)
	}
	for _, tc := range []struct {
		id, status string
	}{{doomed, "deleting"}, {fresh, "pending"}, {held, "ready"}} {
		if n := e.queryInt(`SELECT count(*) FROM resources WHERE id = $1 AND status = $2 AND lease_holder IS NULL`, tc.id, tc.status); n != 1 {
			t.Errorf("resource %s after the new schema: %+v; want it %s with no lease", tc.id, e.get(tc.id), tc.status)
		}
	}
	for _, id := range []string{doomed, fresh} {
		if strings.Contains(old.Logs()[oldLogMark:], id) {
			t.Errorf("the old agent's log mentions %s after the new schema landed:\n%s", id, old.Logs()[oldLogMark:])
		}
	}

	// The new build's agent takes the work over.
	if store == e2etest.SQLite {
		old.Stop(t)
	}
	current := next.StartAgent("agent-new", flags...)
	e.WaitCount("the doomed resource deleted", time.Minute, 0, `SELECT count(*) FROM resources WHERE id = $1`, doomed)
	e.WaitReady(fresh, time.Minute)
	if r := e.get(held); r.Status != "ready" || e.queryInt(`SELECT count(*) FROM resources WHERE id = $1 AND paused`, held) != 1 {
		t.Errorf("the paused resource after the upgrade: %+v; want it ready and still paused", r)
	}
	if a := e.agents()["agent-new"]; a.Schema != "current" || a.SchemaVersion != schema {
		t.Errorf("the new agent is listed as %+v; want its schema current at %d", a, schema)
	}
	for _, id := range []string{doomed, fresh} {
		if strings.Contains(old.Logs()[oldLogMark:], id) {
			t.Errorf("the old agent's log mentions %s after the new schema landed:\n%s", id, old.Logs()[oldLogMark:])
		}
	}

	// The old agents were up all along, and stop cleanly when replaced.
	if rollback != nil {
		old.Stop(t)
		rollback.Stop(t)
	}
	current.Stop(t)
}
