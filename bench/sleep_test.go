package main

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/sleep"
)

func TestSleepFlags(t *testing.T) {
	flagsOnly(t)
	cfg, err := parseConfig(nil, io.Discard)
	if err != nil || !slices.Equal(cfg.sleepAgents, []int{1, 3}) || cfg.sleepN != 3000 || cfg.sleepDelay != 500*time.Millisecond ||
		cfg.sleepConcurrency != 256 || cfg.sleepBinary != "/bin/sh" {
		t.Errorf("defaults %+v, %v; want 1 and 3 agents of 3000 resources, 500ms a reconcile, concurrency 256 (512/s an agent, below what the database takes), the binary of BERTH_BENCHBROKER_BINARY", cfg, err)
	}
	cfg, err = parseConfig([]string{"-sleep-agents", ""}, io.Discard)
	if err != nil || cfg.sleepAgents != nil {
		t.Errorf(`-sleep-agents "": %+v, %v; want no sleep run`, cfg, err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-sleep-agents", "1,x"}, `or "" to skip the runs on the sleep broker`},
		{[]string{"-sleep-n", "0"}, "-sleep-n must be at least 1"},
		{[]string{"-sleep-delay", "0s"}, "-sleep-delay must be positive"},
		{[]string{"-sleep-concurrency", "0"}, "-sleep-concurrency must be at least 1"},
	} {
		if _, err := parseConfig(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseConfig(%q) = %v; want an error containing %q", tc.args, err, tc.err)
		}
	}
	t.Setenv("BERTH_BENCHBROKER_BINARY", "/no/such/berth")
	if _, err := parseConfig(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "-tags benchbroker") {
		t.Errorf("parseConfig without the sleep broker's agent = %v; want an error saying how to build it", err)
	}
	if _, err := parseConfig([]string{"-sleep-agents", ""}, io.Discard); err != nil {
		t.Errorf(`parseConfig -sleep-agents "" without the sleep broker's agent = %v; want none (it is not run)`, err)
	}
}

// The set the sleep runs give the agent is one the sleep broker accepts, with the delay.
func TestSleepSet(t *testing.T) {
	set, err := sleepSet(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var specs map[string]environ.Spec
	if err := json.Unmarshal([]byte(set), &specs); err != nil {
		t.Fatal(err)
	}
	spec, ok := specs[provisionerName]
	if !ok || spec.Type != sleep.Type {
		t.Fatalf("set %s: want provisioner %q of type %q", set, provisionerName, sleep.Type)
	}
	parsed, err := sleep.ParseSpec(spec.Spec)
	if err != nil || parsed.Delay != 50*time.Millisecond {
		t.Errorf("the sleep broker reads %s as %+v, %v; want a delay of 50ms", spec.Spec, parsed, err)
	}
}

func TestReportShowsSleepTarget(t *testing.T) {
	lat := latencySummary{n: 3000, p50: 2 * time.Second, p99: 3 * time.Second, max: 3500 * time.Millisecond}
	run := func(agents int, seconds float64) scalingResult {
		return scalingResult{agents: agents, latency: lat, throughput: throughputResult{
			parallel: 16, n: 3000, elapsed: time.Duration(seconds * float64(time.Second)), peakRSS: 40 << 20,
		}}
	}
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres}, rate: 20, agentsRounds: 1,
		sleepDelay: 50 * time.Millisecond, sleepN: 3000, sleepConcurrency: 16}}
	rep.sleep = []scalingResult{run(1, 10), run(3, 6)}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{
		"Berth (sleep broker: each reconcile waits 50ms) with several agents on one PostgreSQL database: a burst of 3000 resources each",
		"1       concurrency=16 each  300.0 resources/s (3000 in 10.000 s)",
		"3       concurrency=16 each  500.0 resources/s (3000 in 6.000 s)",
		"concurrency / delay = 320 resources/s",
		"throughput with 3 agents / with 1 >= 1.20  1.67 (500.0 resources/s / 300.0 resources/s)  PASS",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	rep.sleep = []scalingResult{run(1, 10), run(3, 9)}
	out.Reset()
	rep.print(&out)
	if !strings.Contains(out.String(), "1.11 (333.3 resources/s / 300.0 resources/s)  MISS") {
		t.Errorf("report lacks the missed target:\n%s", out.String())
	}
}
