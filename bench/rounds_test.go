package main

import (
	"bytes"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// drained is a throughput run of setting draining 1,000 in the given seconds.
func drained(setting string, seconds float64) throughputResult {
	return throughputResult{setting: setting, n: 1000, elapsed: time.Duration(seconds * float64(time.Second))}
}

// Each setting keeps its fastest round's run whole, whichever round it was, and the rates of
// all its rounds in their order.
func TestKeepFastestKeepsEachSettingsFastestRound(t *testing.T) {
	var runs []throughputResult
	for _, round := range [][]throughputResult{
		{drained("a", 2), drained("b", 1)},
		{drained("a", 1), drained("b", 4)},
		{drained("a", 4), drained("b", 2)},
	} {
		for i, r := range round {
			runs = keepFastest(runs, i, r)
		}
	}
	if len(runs) != 2 || runs[0].setting != "a" || runs[0].elapsed != time.Second || runs[1].setting != "b" || runs[1].elapsed != time.Second {
		t.Fatalf("kept %+v; want a and b, each its 1 s run", runs)
	}
	if !slices.Equal(runs[0].rounds, []float64{500, 1000, 250}) || !slices.Equal(runs[1].rounds, []float64{1000, 250, 500}) {
		t.Errorf("rounds %v and %v; want a's 500, 1000, 250/s and b's 1000, 250, 500/s", runs[0].rounds, runs[1].rounds)
	}
	if got, want := runs[0].roundsNote(), "; the fastest of 3 rounds: 500.0, 1000.0, 250.0/s"; got != want {
		t.Errorf("roundsNote = %q; want %q", got, want)
	}
	if got := keepFastest(nil, 0, drained("c", 1))[0].roundsNote(); got != "" {
		t.Errorf("roundsNote of one round = %q; want none", got)
	}
}

// The peer's runs keep their fastest round too, but the hosts it filled past their slots are
// the most of any round, not the fastest round's.
func TestKeepFastestRillKeepsEveryRoundsOverfilledHosts(t *testing.T) {
	runs := keepFastestRill(nil, 0, rillResult{throughputResult: drained("max-workers=10", 2), overfilledHosts: 3})
	runs = keepFastestRill(runs, 0, rillResult{throughputResult: drained("max-workers=10", 1)})
	if len(runs) != 1 || runs[0].elapsed != time.Second || runs[0].overfilledHosts != 3 || !slices.Equal(runs[0].rounds, []float64{500, 1000}) {
		t.Errorf("kept %+v; want the 1 s run, 3 hosts overfilled, rounds 500 and 1000/s", runs)
	}
}

func TestThroughputRoundsFlag(t *testing.T) {
	flagsOnly(t)
	if cfg, err := parseConfig(nil, io.Discard); err != nil || cfg.throughputRounds != 3 {
		t.Errorf("default -throughput-rounds = %d, %v; want 3", cfg.throughputRounds, err)
	}
	if _, err := parseConfig([]string{"-throughput-rounds", "0"}, io.Discard); err == nil || !strings.Contains(err.Error(), "-throughput-rounds must be at least 1") {
		t.Errorf("-throughput-rounds 0: %v; want an error naming the flag", err)
	}
}

// The report shows every round's rate beside the fastest run's figures.
func TestReportShowsEveryRound(t *testing.T) {
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres}, rate: 20}}
	pg := rep.berthOn(storePostgres)
	pg.throughput = keepFastest(keepFastest(nil, 0, drained("concurrency=256", 2)), 0, drained("concurrency=256", 1))
	rep.river = keepFastest(keepFastest(nil, 0, drained("max-workers=200", 1)), 0, drained("max-workers=200", 4))
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{
		"1000.0 resources/s (1.000 s after the insert's 0.000 s; agent peak RSS 0.0 MiB, CPU 0 us/resource; the fastest of 2 rounds: 500.0, 1000.0/s)",
		"1000.0 jobs/s (1.000 s after the insert's 0.000 s; the fastest of 2 rounds: 1000.0, 250.0/s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// The latency runs at the fastest throughput run's setting run the agent as that run did:
// at the default settings, its limit adapting, not fixed at the ceiling.
func TestLatencyRunsAtTheFastestRunsSetting(t *testing.T) {
	for _, tc := range []struct {
		run  throughputResult
		want fleet
	}{
		{throughputResult{setting: "concurrency=256", parallel: 256}, fleet{agents: 1, concurrency: 256}},
		{throughputResult{setting: "default (16 to 1024)", parallel: 1024, adaptive: true}, fleet{agents: 1, concurrency: 1024, adaptive: true}},
	} {
		if got := tc.run.agentFleet(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: agentFleet = %+v; want %+v", tc.run.setting, got, tc.want)
		}
	}
}
