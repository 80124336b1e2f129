package main

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/pgtest"
)

func TestAgentFlags(t *testing.T) {
	flagsOnly(t)
	cfg, err := parseConfig(nil, io.Discard)
	if err != nil || !slices.Equal(cfg.agentCounts, []int{1, 2, 3}) || cfg.agentsN != 3000 || cfg.agentsRounds != 3 || cfg.agentConcurrency != 16 ||
		!cfg.failover || cfg.failoverAgents != 3 || cfg.failoverTTL != 15*time.Second || cfg.failoverHeartbeat != 2*time.Second {
		t.Errorf("defaults %+v, %v; want three rounds of 1, 2 and 3 agents of 3000 resources at concurrency 16, failover of 3 agents at 15s and 2s", cfg, err)
	}
	cfg, err = parseConfig([]string{"-agents", "", "-failover=false", "-failover-agents", "1"}, io.Discard)
	if err != nil || cfg.agentCounts != nil || cfg.failover {
		t.Errorf(`-agents "" -failover=false: %+v, %v; want neither run (and -failover-agents unchecked)`, cfg, err)
	}
	cfg, err = parseConfig([]string{"-agents", "2, 4", "-agents-n", "500"}, io.Discard)
	if err != nil || !slices.Equal(cfg.agentCounts, []int{2, 4}) || cfg.agentsN != 500 {
		t.Errorf("-agents 2,4 -agents-n 500: %+v, %v", cfg, err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-agents", "1,0"}, `-agents: "0" is not a positive integer`},
		{[]string{"-agents", "two"}, `or "" to skip`},
		{[]string{"-agents-n", "0"}, "-agents-n must be at least 1"},
		{[]string{"-agents-rounds", "0"}, "-agents-rounds must be at least 1"},
		{[]string{"-agents-concurrency", "0"}, "-agents-concurrency must be at least 1"},
		{[]string{"-failover-agents", "1"}, "-failover-agents must be at least 2"},
		{[]string{"-failover-heartbeat-interval", "0s"}, "-failover-heartbeat-interval must be positive"},
		{[]string{"-failover-agent-ttl", "3s"}, "-failover-agent-ttl (3s) must be at least twice -failover-heartbeat-interval (2s)"},
	} {
		if _, err := parseConfig(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseConfig(%q) = %v; want an error containing %q", tc.args, err, tc.err)
		}
	}
}

func TestReadySpan(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	ready := func(created, readyAt float64) domain.Resource {
		r := at(readyAt)
		return domain.Resource{CreatedAt: at(created), ReadyAt: &r}
	}
	span, lat := readySpan([]domain.Resource{ready(1, 3), ready(0, 2), ready(1, 5)})
	if span != 5*time.Second || !slices.Equal(lat, []time.Duration{2 * time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Errorf("readySpan = %s, %v; want 5s from the first creation to the last ready, latencies [2s 2s 4s]", span, lat)
	}
}

func TestMostLeases(t *testing.T) {
	for _, tc := range []struct {
		leases map[string]int
		want   string
	}{
		{map[string]int{"bench-1": 3, "bench-2": 8, "bench-3": 8}, "bench-2"},
		{map[string]int{"bench-3": 1}, "bench-3"},
		{map[string]int{"bench-1": 0}, ""},
		{nil, ""},
	} {
		if got := mostLeases(tc.leases); got != tc.want {
			t.Errorf("mostLeases(%v) = %q; want %q", tc.leases, got, tc.want)
		}
	}
}

func TestFastestByAgents(t *testing.T) {
	run := func(agents int, seconds float64) scalingResult {
		return scalingResult{agents: agents, throughput: throughputResult{n: 1000, elapsed: time.Duration(seconds * float64(time.Second))}}
	}
	got := fastestByAgents([]scalingResult{run(1, 3), run(3, 2), run(1, 2), run(3, 4), run(2, 1)})
	want := []scalingResult{run(1, 2), run(3, 2), run(2, 1)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fastestByAgents = %+v; want %+v", got, want)
	}
}

func TestScalingRatios(t *testing.T) {
	run := func(agents int, seconds float64) scalingResult {
		return scalingResult{agents: agents, throughput: throughputResult{n: 1000, elapsed: time.Duration(seconds * float64(time.Second))}}
	}
	got := scalingRatios([]scalingResult{run(1, 2), run(2, 1), run(3, 4)})
	if len(got) != 2 || got[2] != 2 || got[3] != 0.5 {
		t.Errorf("scalingRatios = %v; want 2 agents at 2.0, 3 at 0.5", got)
	}
	if got := scalingRatios([]scalingResult{run(2, 1), run(3, 1)}); got != nil {
		t.Errorf("scalingRatios without a one-agent run = %v; want nil", got)
	}
}

func TestReportShowsAgentsSideBySide(t *testing.T) {
	lat := latencySummary{n: 3000, p50: 2 * time.Second, p99: 3 * time.Second, max: 3500 * time.Millisecond}
	run := func(agents int, seconds float64) scalingResult {
		return scalingResult{agents: agents, latency: lat, throughput: throughputResult{
			parallel: 16, n: 3000, elapsed: time.Duration(seconds * float64(time.Second)), peakRSS: 40 << 20,
		}}
	}
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres}, rate: 20, agentsRounds: 2}}
	rep.scaling = []scalingResult{run(1, 6), run(2, 5), run(3, 8), run(1, 7), run(2, 6), run(3, 9)}
	rep.failover = &failoverResult{
		agents: 3, n: 3000, agentTTL: 15 * time.Second, heartbeat: 2 * time.Second, victim: "bench-2", readyAtKill: 1000, held: 16,
		firstTakenOver: 15200 * time.Millisecond, heldReady: 15400 * time.Millisecond, allReady: 15500 * time.Millisecond, burst: 19 * time.Second,
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{
		"with several agents on one PostgreSQL database: a burst of -agents-n resources each, the fastest of 2 rounds",
		"1       concurrency=16 each  500.0 resources/s (3000 in 6.000 s)",
		"3       concurrency=16 each  375.0 resources/s (3000 in 8.000 s)",
		"p50 2000.0 ms, p99 3000.0 ms, max 3500.0 ms",
		"throughput with 2 agents / with 1 >= 1.00  1.20 (600.0 resources/s / 500.0 resources/s)  PASS",
		"throughput with 3 agents / with 1 >= 1.00  0.75 (375.0 resources/s / 500.0 resources/s)  MISS",
		"Failover: 3 agents (--agent-ttl 15s, --heartbeat-interval 2s) drain a burst of 3000 resources",
		"bench-2, holding the most leases (or, when none holds any, the first agent), is killed with SIGKILL once 1000 are ready",
		"kill -> its resources ready again                    15.400 s (the first at 15.200 s)",
		"kill -> the whole burst ready                        15.500 s",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	if strings.Contains(out.String(), "in 7.000 s") {
		t.Errorf("report shows a slower round beside the fastest:\n%s", out.String())
	}

	rep.scaling = []scalingResult{run(2, 5), run(3, 8)}
	rep.failover = nil
	out.Reset()
	rep.print(&out)
	if strings.Contains(out.String(), "agents / with 1") || strings.Contains(out.String(), "Failover") {
		t.Errorf("report shows a scaling target without a one-agent run, or failover without its run:\n%s", out.String())
	}
}

// The failover run's SQL: the leases by holder, the kill noted with the victim's
// resources, and the times read once all are ready.
func TestFailoverSQL(t *testing.T) {
	ctx := context.Background()
	r := migratedRun(t, storePostgres, pgtest.New(t))
	db := r.sql
	if err := r.insert(ctx, "bench", 6); err != nil {
		t.Fatal(err)
	}
	// bench-0 is ready; bench-1..3 leased by bench-2, bench-4 by bench-1, bench-5 by nobody.
	if _, err := db.ExecContext(ctx, `
		UPDATE resources SET status = 'ready', ready_at = created_at + interval '1 second' WHERE name = 'bench-0';
		UPDATE resources SET lease_holder = 'bench-2', lease_expires_at = now() + interval '10 minutes' WHERE name IN ('bench-1', 'bench-2', 'bench-3');
		UPDATE resources SET lease_holder = 'bench-1', lease_expires_at = now() + interval '10 minutes' WHERE name = 'bench-4'`); err != nil {
		t.Fatal(err)
	}
	leases, err := r.leasesByHolder(ctx)
	if err != nil || len(leases) != 2 || leases["bench-2"] != 3 || leases["bench-1"] != 1 {
		t.Fatalf("leasesByHolder = %v, %v; want bench-2 3, bench-1 1", leases, err)
	}
	res := failoverResult{victim: "bench-2"}
	killedAt, err := r.noteKill(ctx, &res)
	if err != nil || res.held != 3 || res.readyAtKill != 1 {
		t.Fatalf("noteKill: %+v, %v; want 3 held, 1 ready", res, err)
	}
	// The victim's resources ready 2s to 4s after the kill, the others at 5s, one lease left.
	if _, err := db.ExecContext(ctx, `
		UPDATE resources SET status = 'ready', lease_holder = NULL, lease_expires_at = NULL,
		       ready_at = $1::timestamptz + (CASE name WHEN 'bench-1' THEN 2 WHEN 'bench-2' THEN 3 WHEN 'bench-3' THEN 4 ELSE 5 END) * interval '1 second'
		 WHERE name <> 'bench-0'`, killedAt); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE resources SET lease_holder = 'bench-2' WHERE name = 'bench-5'`); err != nil {
		t.Fatal(err)
	}
	if err := r.failoverTimes(ctx, killedAt, &res); err != nil {
		t.Fatal(err)
	}
	if res.firstTakenOver != 2*time.Second || res.heldReady != 4*time.Second || res.allReady != 5*time.Second || res.leftHeld != 1 {
		t.Errorf("failoverTimes: %+v; want the victim's ready from 2s to 4s, all at 5s, one lease left", res)
	}
	if res.burst < 5*time.Second {
		t.Errorf("burst %s; want at least the 5s from the kill to the last ready", res.burst)
	}
}
