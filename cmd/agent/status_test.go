package main

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/juju/clock"
)

// engineReport is a report as the dependency engine writes it and /debug/engine serves it.
const engineReport = `{
  "state": "started",
  "manifolds": {
    "clock": {"state": "started", "inputs": null, "start-count": 1, "started": "2025-03-01 12:00:00"},
    "database": {"state": "stopped", "inputs": ["clock"], "start-count": 3, "started": "2025-03-01 12:04:10",
                 "error": "database unreachable after 3 checks: dial tcp 10.0.0.9:5432: connect: connection refused"},
    "environs": {"state": "stopped", "inputs": ["clock", "database"], "error": "\"database\" not running: dependency not available"},
    "provisioner": {"state": "started", "inputs": ["clock", "database", "environs"], "start-count": 1,
                    "started": "2025-03-01 12:00:01", "report": {"queue-depth": 2, "in-flight": 1}}
  }
}`

// agentServing starts a server answering /debug/engine with body and returns its address.
func agentServing(t *testing.T, code int, body string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/engine", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestStatusTable(t *testing.T) {
	clearStatusEnv(t)
	addr := agentServing(t, http.StatusOK, engineReport)
	out, _, err := runBerth(clock.WallClock, "status", "--agent-addr", addr)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 9 {
		t.Fatalf("status printed %d lines, want 9:\n%s", len(lines), out)
	}
	if lines[0] != "agent: "+addr+" (from --agent-addr)" || lines[1] != "database: not reported (its database worker is stopped)" {
		t.Errorf("agent and database lines = %q, %q", lines[0], lines[1])
	}
	if lines[2] != "engine: started" || lines[3] != "" {
		t.Errorf("engine line = %q, %q", lines[2], lines[3])
	}
	want := [][]string{
		{"WORKER", "STATE", "STARTS", "RESTARTS", "LAST", "START", "ERROR", "REPORT"},
		{"clock", "started", "1", "0", "2025-03-01", "12:00:00", "-", "-"},
		{"database", "stopped", "3", "2", "2025-03-01", "12:04:10", "database", "unreachable", "after", "3", "checks:", "dial", "tcp", "10.0.0.9:5432:", "connect:", "connection", "refused", "-"},
		{"environs", "stopped", "0", "0", "-", `"database"`, "not", "running:", "dependency", "not", "available", "-"},
		{"provisioner", "started", "1", "0", "2025-03-01", "12:00:01", "-", "in-flight=1", "queue-depth=2"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i+4]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want fields %q", i+4, lines[i+4], w)
		}
	}
	// The columns line up: every row's STATE starts where the header's does.
	col := strings.Index(lines[4], "STATE")
	for _, line := range lines[5:] {
		if len(line) <= col || line[col-1] != ' ' || line[col] == ' ' {
			t.Errorf("STATE column misaligned in %q", line)
		}
	}
}

func TestStatusJSON(t *testing.T) {
	clearStatusEnv(t)
	addr := agentServing(t, http.StatusOK, engineReport)
	out, _, err := runBerth(clock.WallClock, "status", "--agent-addr", "http://"+addr+"/", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	decodeOne(t, out, &got)
	if err := json.Unmarshal([]byte(engineReport), &want); err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("status -o json = %s, want the agent's report %s", gotJSON, wantJSON)
	}
}

func TestStatusNoAgent(t *testing.T) {
	clearStatusEnv(t)
	// A port that was free a moment ago: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	_, _, err = runBerth(clock.WallClock, "status", "--agent-addr", addr)
	want := "no agent answers on " + addr + ": is `berth run` running with --http-addr " + addr + "? ("
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("status without an agent: %v, want it to start %q", err, want)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %v does not unwrap to connection refused", err)
	}
}

func TestStatusNotAnAgent(t *testing.T) {
	clearStatusEnv(t)
	for _, tc := range []struct {
		code int
		body string
		err  string
	}{
		{http.StatusNotFound, "404 page not found", `the server on .* answered /debug/engine with 404 Not Found: is --agent-addr the address of ` + "`berth run --http-addr`" + `\?`},
		{http.StatusOK, "<html>hello</html>", `the answer of .* to /debug/engine is not an engine report \(.*\): is --agent-addr .*`},
	} {
		addr := agentServing(t, tc.code, tc.body)
		_, _, err := runBerth(clock.WallClock, "status", "--agent-addr", addr)
		if err == nil || !regexpMatch("^"+tc.err+"$", err.Error()) {
			t.Errorf("status against %d %q: %v, want %s", tc.code, tc.body, err, tc.err)
		}
	}
}

// clearStatusEnv is clearEnv, and no BERTH_AGENT_ADDR either.
func clearStatusEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv(envAgentAddr, "")
}
