package e2e_test

import (
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// listenAddr returns a loopback address nothing listens on right now, for an agent's
// --http-addr: a port of its own, as `make run RUN_ARGS="--http-addr ..."` gives it when
// 9090 is taken.
func listenAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// berth status, with no flag and no BERTH_AGENT_ADDR, finds the leader at the address it
// registered in the agents table, not on the default port; --agent asks another agent; and
// an agent of another database, named by BERTH_AGENT_ADDR, is refused, naming both.
func TestStatusFindsTheAgentThroughTheAgentsTable(t *testing.T) {
	t.Setenv("BERTH_AGENT_ADDR", "")
	e := newEnv(t, map[string]int{"a": 4})
	first, second := listenAddr(t), listenAddr(t)
	e.StartAgent("e2e-first", "--http-addr", first)
	e.StartAgent("e2e-second", "--http-addr", second)

	leaderLine := regexp.MustCompile(`(?m)^agent: (e2e-first|e2e-second) \(the leader\) on (\S+)$`)
	var status string
	e.eventually("berth status finds the leader", 30*time.Second, func() (bool, string) {
		out, stderr, err := e.tryBerth("status")
		status = out
		return err == nil && leaderLine.MatchString(out), out + stderr
	})
	m := leaderLine.FindStringSubmatch(status)
	leader, leaderAddr := m[1], m[2]
	other, otherAddr := "e2e-second", second
	if leader == "e2e-second" {
		other, otherAddr = "e2e-first", first
	}
	if want := map[string]string{"e2e-first": first, "e2e-second": second}[leader]; leaderAddr != want {
		t.Errorf("status asked %s on %s, want the address it registered, %s", leader, leaderAddr, want)
	}
	if !regexp.MustCompile(`(?m)^database: PostgreSQL database \S+ on \S+ \(id [0-9a-f]{16}, the CLI's database\)$`).MatchString(status) ||
		!regexp.MustCompile(`(?m)^provisioner\s+started\s`).MatchString(status) {
		t.Errorf("status should show the agent's database, the CLI's, and its workers:\n%s", status)
	}
	if out := e.berth("status", "--agent", other); !strings.HasPrefix(out, "agent: "+other+" on "+otherAddr+"\n") {
		t.Errorf("status --agent %s printed:\n%s", other, out)
	}

	elsewhere := newEnvOn(t, e2etest.SQLite, map[string]int{"b": 4})
	strangerAddr := listenAddr(t)
	elsewhere.StartAgent("e2e-stranger", "--http-addr", strangerAddr)
	t.Setenv("BERTH_AGENT_ADDR", strangerAddr)
	want := regexp.MustCompile(`^the agent on ` + regexp.QuoteMeta(strangerAddr) + ` works on another database: SQLite file \S+ \(id [0-9a-f]{16}\), ` +
		`while this CLI uses PostgreSQL database \S+ on \S+ \(id [0-9a-f]{16}\): point the CLI at the agent's database`)
	e.eventually("berth status refuses the agent of another database", 30*time.Second, func() (bool, string) {
		out, stderr, err := e.tryBerth("status")
		return err != nil && want.MatchString(strings.TrimPrefix(stderr, "berth: ")), out + stderr
	})
}
