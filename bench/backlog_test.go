package main

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/pgtest"
)

func TestScaleFlags(t *testing.T) {
	flagsOnly(t)
	cfg, err := parseConfig(nil, io.Discard)
	if err != nil || cfg.scaleN != 100000 || cfg.scaleConcurrency != 0 {
		t.Errorf("defaults %+v, %v; want a scale run of 100000 at the fastest run's concurrency", cfg, err)
	}
	cfg, err = parseConfig([]string{"-scale-n", "0"}, io.Discard)
	if err != nil || cfg.scaleN != 0 {
		t.Errorf("-scale-n 0: %+v, %v; want the scale run skipped", cfg, err)
	}
	cfg, err = parseConfig([]string{"-scale-n", "20000", "-scale-concurrency", "32"}, io.Discard)
	if err != nil || cfg.scaleN != 20000 || cfg.scaleConcurrency != 32 {
		t.Errorf("-scale-n 20000 -scale-concurrency 32: %+v, %v", cfg, err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-scale-n", "-1"}, "-scale-n must be at least 0 (0 skips the scale run)"},
		{[]string{"-scale-concurrency", "-1"}, "-scale-concurrency must be at least 0"},
	} {
		if _, err := parseConfig(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseConfig(%q) = %v; want an error containing %q", tc.args, err, tc.err)
		}
	}
}

func TestScaleAgent(t *testing.T) {
	cfg := config{berthConcurrency: []int{16, 64, 32}}
	rep := &report{cfg: cfg}
	if got := scaleAgent(cfg, rep); !reflect.DeepEqual(got, oneAgent(64)) || got.setting() != "concurrency=64" {
		t.Errorf("without PostgreSQL runs: %+v; want the largest of -berth-concurrency, 64, fixed", got)
	}
	pg := rep.berthOn(storePostgres)
	pg.throughput = []throughputResult{
		{parallel: 16, n: 1000, elapsed: time.Second},
		{parallel: 64, n: 1000, elapsed: 2 * time.Second},
	}
	if got := scaleAgent(cfg, rep); !reflect.DeepEqual(got, oneAgent(16)) {
		t.Errorf("after PostgreSQL runs: %+v; want the fastest run's, 16, fixed", got)
	}
	pg.throughput = append(pg.throughput, throughputResult{parallel: 1024, adaptive: true, n: 1000, elapsed: time.Second / 2})
	want := fleet{agents: 1, concurrency: 1024, adaptive: true}
	if got := scaleAgent(cfg, rep); !reflect.DeepEqual(got, want) || got.setting() != "default (16 to 1024)" {
		t.Errorf("with the default settings' run the fastest: %+v (%s); want its setting, the limit adapting", got, got.setting())
	}
	cfg.scaleConcurrency = 8
	if got := scaleAgent(cfg, rep); !reflect.DeepEqual(got, oneAgent(8)) {
		t.Errorf("with -scale-concurrency 8: %+v; want 8, fixed", got)
	}
}

func TestBacklogTargets(t *testing.T) {
	base := backlogResult{n: 100000, burst: 125 * time.Second, drained: 200 * time.Second,
		burstRSS: 100 << 20, restartRSS: 110 << 20, firstChange: 2 * time.Second}
	if base.burstPerSecond() != 800 || base.drainPerSecond() != 500 {
		t.Errorf("rates %.1f, %.1f; want 800 and 500 resources/s", base.burstPerSecond(), base.drainPerSecond())
	}
	if !base.burstRSSMet() || !base.firstReconcileMet() || !base.flatRSSMet() {
		t.Errorf("%+v: want every target met at its bound", base)
	}
	over := base
	over.burstRSS, over.restartRSS, over.firstChange = 256<<20+1, 282<<20, 2*time.Second+time.Millisecond
	if over.burstRSSMet() || over.firstReconcileMet() || over.flatRSSMet() {
		t.Errorf("%+v: want every target missed just past its bound", over)
	}
}

func TestRSSQuarters(t *testing.T) {
	samples := []rssSample{{ready: 0, rss: 10}, {ready: 10, rss: 20}, {ready: 30, rss: 30}, {ready: 49, rss: 40}, {ready: 80, rss: 50}, {ready: 100, rss: 60}}
	if got, want := rssQuarters(samples, 100), [5]int64{10, 30, 50, 50, 60}; got != want {
		t.Errorf("rssQuarters = %v; want %v: the first sample at or past each quarter", got, want)
	}
	if got, want := rssQuarters(samples[:3], 100), [5]int64{10, 30, 0, 0, 0}; got != want {
		t.Errorf("rssQuarters of a drain sampled to 30%% = %v; want %v", got, want)
	}
	if got := quarters([]rssSample{{ready: 0, rss: 40 << 20}, {ready: 100, rss: 61 << 20}}, 100); got != "40 / 61 / 61 / 61 / 61 MiB" {
		t.Errorf("quarters = %q", got)
	}
}

func TestPeakReached(t *testing.T) {
	samples := []rssSample{{ready: 0, hwm: 40}, {ready: 10, hwm: 90}, {ready: 50, hwm: 90}, {ready: 100, hwm: 95}}
	if got, ok := peakReached(samples, 90); !ok || got != 10 {
		t.Errorf("peakReached(90) = %d, %v; want 10: the first sample at the peak", got, ok)
	}
	if _, ok := peakReached(samples, 96); ok {
		t.Error("peakReached(96): want none, no sample reached it")
	}
	if got := reachedBy(samples, 90, 200); got != " (reached by 5% ready)" {
		t.Errorf("reachedBy = %q", got)
	}
	if got := reachedBy(nil, 90, 200); got != "" {
		t.Errorf("reachedBy without samples = %q; want nothing", got)
	}
}

func TestVMRSS(t *testing.T) {
	got, err := statusBytes([]byte("VmHWM:\t   45678 kB\nVmRSS:\t 40000 kB\n"), "VmRSS")
	if err != nil || got != 40000<<10 {
		t.Errorf("VmRSS = %d, %v; want %d", got, err, 40000<<10)
	}
	if _, err := statusBytes([]byte("VmHWM:\t   45678 kB\n"), "VmRSS"); err == nil || !strings.Contains(err.Error(), "no VmRSS line") {
		t.Errorf("status without VmRSS: %v; want an error naming VmRSS", err)
	}
}

func TestReportShowsScaleRun(t *testing.T) {
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres}, rate: 20}}
	rep.backlog = &backlogResult{n: 100000, agent: oneAgent(64), burst: 125 * time.Second, burstRSS: 80 << 20,
		firstChange: 300 * time.Millisecond, firstReady: 450 * time.Millisecond, drained: 200 * time.Second, restartRSS: 96 << 20,
		restartSamples: []rssSample{{0, 30 << 20, 30 << 20}, {30000, 60 << 20, 96 << 20}, {60000, 90 << 20, 96 << 20}, {100000, 95 << 20, 96 << 20}}}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{
		"one agent at concurrency=64: a burst of 100000 runtimes inserted at once",
		"burst, insert -> all ready                   125.000 s, 800.0 resources/s",
		"restart, process start -> first reconcile    0.300 s (first ready at 0.450 s)",
		"restart, process start -> backlog ready      200.000 s, 500.0 resources/s",
		"restart, agent RSS at 0/25/50/75/100% ready  30 / 60 / 90 / 95 / 95 MiB",
		"restart, agent peak RSS                      96.0 MiB (reached by 30% ready)",
		"burst, agent RSS at 0/25/50/75/100% ready    not sampled",
		"burst: peak RSS <= 256.0 MiB                          80.0 MiB",
		"restart: first reconcile within 2s of start           0.300 s                        PASS",
		"restart: RSS stays flat (peak <= 1.10 x the burst's)  96.0 MiB vs 80.0 MiB (1.20 x)  MISS",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	rep.backlog = nil
	out.Reset()
	rep.print(&out)
	if strings.Contains(out.String(), "Scale on PostgreSQL") {
		t.Errorf("report shows the scale run without its figures:\n%s", out.String())
	}
}

// The scale run's SQL: the burst's span, the database clock, and the backlog's times from
// the agent's start, its first reconcile being the first status event after the start.
func TestBacklogSQL(t *testing.T) {
	ctx := context.Background()
	r := migratedRun(t, storePostgres, pgtest.New(t))
	db := r.sql
	if err := r.insert(ctx, scaleBurstPrefix, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `
		UPDATE resources SET status = 'ready', ready_at = created_at + (CASE name WHEN 'scale-2' THEN 7 ELSE 1 END) * interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	span, err := r.burstSpan(ctx, scaleBurstPrefix)
	if err != nil || span != 7*time.Second {
		t.Fatalf("burstSpan = %s, %v; want 7s", span, err)
	}
	if err := r.insert(ctx, scaleBacklogPrefix, 3); err != nil {
		t.Fatal(err)
	}
	startedAt, err := r.clock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var res backlogResult
	if err := r.backlogTimes(ctx, scaleBacklogPrefix, startedAt, &res); err == nil {
		t.Fatalf("backlogTimes before any change: %+v; want an error", res)
	}
	// All are ready from 2s to 4s after the start, their ready events (logged by the trigger)
	// moved to 2s; backlog-0 moved to provisioning at 1s. The insert's 'created' events came
	// before the start.
	if _, err := db.ExecContext(ctx, `
		UPDATE resources SET status = 'ready',
		       ready_at = $1::timestamptz + (CASE name WHEN 'backlog-0' THEN 2 WHEN 'backlog-1' THEN 3 ELSE 4 END) * interval '1 second'
		 WHERE name LIKE 'backlog-%'`, startedAt); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `
		UPDATE resource_events SET at = $1::timestamptz + interval '2 seconds' WHERE at >= $1::timestamptz`, startedAt); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `
		INSERT INTO resource_events (resource_id, at, kind, status)
		SELECT id, $1::timestamptz + interval '1 second', 'status', 'provisioning' FROM resources WHERE name = 'backlog-0'`, startedAt); err != nil {
		t.Fatal(err)
	}
	if err := r.backlogTimes(ctx, scaleBacklogPrefix, startedAt, &res); err != nil {
		t.Fatal(err)
	}
	if res.firstChange != time.Second || res.firstReady != 2*time.Second || res.drained != 4*time.Second {
		t.Errorf("backlogTimes: %+v; want the first reconcile at 1s, ready from 2s to 4s", res)
	}
}
