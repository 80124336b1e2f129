package monitoring_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// agentFlags make the agent heartbeat, sample capacity, check environs and resources, and
// retry quickly enough that every series appears within seconds.
var agentFlags = []string{
	"--poll-interval", "200ms",
	"--heartbeat-interval", "200ms",
	"--agent-ttl", "1s",
	"--backoff-base", "100ms",
	"--backoff-max", "1s",
	"--capacity-retry", "500ms",
	"--health-interval", "1s",
	"--capacity-interval", "1s",
}

// servingRE finds the agent's HTTP address in its log.
var servingRE = regexp.MustCompile(`msg="serving health, metrics and engine report".* address=(\S+)`)

// TestMetricsExistOnARunningAgent runs the real agent on PostgreSQL over a static pool of
// two stand-in runtime hosts, with one runtime whose lease a departed agent left behind
// (as an agent killed mid-attempt leaves it), and checks that every metric the dashboard
// and the rules use appears on its /metrics once it has taken that runtime over, made it
// ready, health-checked it, checked the environ and sampled capacity. A metric renamed in
// metrics/ without the dashboard and rules, or one they misspell, fails here.
func TestMetricsExistOnARunningAgent(t *testing.T) {
	used := usedMetrics(t)
	var runtimes []map[string]any
	for range 2 {
		host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/ping" {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusNotFound)
		}))
		t.Cleanup(host.Close)
		runtimes = append(runtimes, map[string]any{"host": host.URL, "slots": 2, "data_dir": "/mnt/data"})
	}
	e := e2etest.New(t, map[string]any{"pool": map[string]any{"type": "static", "spec": map[string]any{"runtimes": runtimes}}})

	id := e.Create("--type", "runtime", "--name", "taken-over", "--owner", "monitoring", "--arg", "slots=1")
	if _, err := e.SQL.ExecContext(t.Context(),
		`UPDATE resources SET lease_holder = 'departed-agent', lease_expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatalf("leave a departed agent's lease on the runtime: %v", err)
	}

	agent := e.StartAgent("monitoring-agent", agentFlags...)
	var addr string
	e.Eventually("the agent serves /metrics", 30*time.Second, func() (bool, string) {
		m := servingRE.FindStringSubmatch(agent.Logs())
		if m != nil {
			addr = m[1]
		}
		return m != nil, "no address in the log yet"
	})
	e.WaitReady(id, time.Minute)

	var missing []string
	e.Eventually("every metric of the dashboard and the rules is served", time.Minute, func() (bool, string) {
		served, err := scrapeNames("http://" + addr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		missing = missing[:0]
		for _, name := range used {
			if !served[name] {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not served: %s", strings.Join(missing, ", "))
	})
}

// scrapeNames is the name of every sample url serves in Prometheus's text format (a
// histogram's _bucket, _sum and _count each).
func scrapeNames(url string) (map[string]bool, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	names := map[string]bool{}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for lines.Scan() {
		line := lines.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if end := strings.IndexAny(line, "{ "); end > 0 {
			names[line[:end]] = true
		}
	}
	return names, lines.Err()
}
