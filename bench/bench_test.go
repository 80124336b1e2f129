package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
	"github.com/berth-dev/berth/internal/pgtest"
)

func TestVMHWM(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   int64
		ok     bool
	}{
		{"Name:\tberth\nVmPeak:\t  900 kB\nVmHWM:\t   45678 kB\nVmRSS:\t 40000 kB\n", 45678 << 10, true},
		{"Name:\tberth\nVmRSS:\t 40000 kB\n", 0, false},
		{"VmHWM:\t lots kB\n", 0, false},
	} {
		got, err := vmHWM([]byte(tc.status))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("vmHWM(%q) = %d, %v; want %d, ok=%v", tc.status, got, err, tc.want, tc.ok)
		}
	}
}

func TestStatCPUTime(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want time.Duration
		ok   bool
	}{
		// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
		{"4242 (berth) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 31 0 0 20 0 12 0", 2810 * time.Millisecond, true},
		{"4242 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 7 3 0 0", 100 * time.Millisecond, true},
		{"4242 (berth) S 1 4242", 0, false},
		{"4242 berth S", 0, false},
		{"4242 (berth) S 1 4242 4242 0 -1 4194560 900 0 0 0 lots 31", 0, false},
	} {
		got, err := statCPUTime([]byte(tc.stat))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("statCPUTime(%q) = %v, %v; want %v, ok=%v", tc.stat, got, err, tc.want, tc.ok)
		}
	}
}

func TestSummarize(t *testing.T) {
	var sample []time.Duration
	for i := 100; i >= 1; i-- {
		sample = append(sample, time.Duration(i)*time.Millisecond)
	}
	got, err := summarize("s", sample)
	if err != nil {
		t.Fatal(err)
	}
	if got.n != 100 || got.p50 != 50*time.Millisecond || got.p99 != 99*time.Millisecond || got.max != 100*time.Millisecond {
		t.Errorf("summarize = %+v; want n 100, p50 50ms, p99 99ms, max 100ms", got)
	}
	if _, err := summarize("s", nil); err == nil {
		t.Error("summarize of an empty sample: want an error")
	}
}

func TestPositiveInts(t *testing.T) {
	got, err := positiveInts("-x", "16, 64")
	if err != nil || len(got) != 2 || got[0] != 16 || got[1] != 64 {
		t.Errorf(`positiveInts("16, 64") = %v, %v; want [16 64]`, got, err)
	}
	for _, bad := range []string{"", "0", "16,", "a"} {
		if _, err := positiveInts("-x", bad); err == nil {
			t.Errorf("positiveInts(%q): want an error", bad)
		}
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ server, want string }{
		{"postgres://u:p@h:5432/postgres?sslmode=disable", "postgres://u:p@h:5432/berth_bench_x?sslmode=disable"},
		{"postgres://h/postgres?dbname=postgres", "postgres://h/berth_bench_x"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname=berth_bench_x"},
	} {
		got, err := withDatabase(tc.server, "berth_bench_x")
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tc.server, got, err, tc.want)
		}
	}
}

func TestProvisionerSetFitsEverySlot(t *testing.T) {
	for _, tc := range []struct{ slots, hosts int }{{1, minHosts}, {10001, minHosts}, {12001, 13}} {
		set, err := provisionerSet(tc.slots)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(set, `"slots":1000`); got != tc.hosts {
			t.Errorf("provisionerSet(%d) has %d hosts; want %d", tc.slots, got, tc.hosts)
		}
	}
}

// The throughput runs' hosts are only names: their set turns health probes off, or every
// host would be found down and nothing placed.
func TestProvisionerSetTurnsProbesOff(t *testing.T) {
	spec := parseOnlySpec(t, func() (string, error) { return provisionerSet(10) })
	if spec.HealthPath != "" {
		t.Errorf("health path %q; want probes off", spec.HealthPath)
	}
}

// The health sweep's hosts are served: its set probes them on the path they answer.
func TestHealthSetProbesTheServedPath(t *testing.T) {
	hosts := []string{"http://127.0.0.1:4001", "http://127.0.0.1:4002"}
	spec := parseOnlySpec(t, func() (string, error) {
		set, err := healthSet(hosts)
		return string(set), err
	})
	if spec.HealthPath != static.DefaultHealthPath {
		t.Errorf("health path %q; want %q", spec.HealthPath, static.DefaultHealthPath)
	}
	if len(spec.Runtimes) != 2 || spec.Runtimes[1].Host != hosts[1] || spec.Runtimes[1].Slots != slotsPerHost {
		t.Errorf("runtimes %+v; want the served hosts with %d slots each", spec.Runtimes, slotsPerHost)
	}
}

// parseOnlySpec parses the one static spec of a provisioner set as the agent would.
func parseOnlySpec(t *testing.T, set func() (string, error)) *static.Spec {
	t.Helper()
	raw, err := set()
	if err != nil {
		t.Fatal(err)
	}
	var specs map[string]environ.Spec
	if err := json.Unmarshal([]byte(raw), &specs); err != nil {
		t.Fatal(err)
	}
	entry, ok := specs[provisionerName]
	if len(specs) != 1 || !ok || entry.Type != static.Type {
		t.Fatalf("set %s; want one static provisioner %q", raw, provisionerName)
	}
	spec, err := static.ParseSpec(entry.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestHealthFlags(t *testing.T) {
	flagsOnly(t)
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-health-n", "-1"}, "-health-n must be at least 0"},
		{[]string{"-health-concurrency", "0"}, "-health-concurrency must be at least 1"},
		{[]string{"-compare=false", "-health-n", "0", "-fair-n", "0"}, "nothing to measure"},
	} {
		_, err := parseConfig(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseConfig(%q) = %v; want an error containing %q", tc.args, err, tc.err)
		}
	}
	cfg, err := parseConfig([]string{"-compare=false", "-health-n", "2000"}, io.Discard)
	if err != nil || cfg.compare || cfg.healthN != 2000 || cfg.healthConcurrency != 8 {
		t.Errorf("parseConfig = %+v, %v; want the sweep alone, of 2000 resources at concurrency 8", cfg, err)
	}
}

func TestStoreFlags(t *testing.T) {
	flagsOnly(t)
	cfg, err := parseConfig(nil, io.Discard)
	if err != nil || strings.Join(cfg.stores, ",") != "postgres,sqlite" || cfg.n != 10000 || cfg.sqliteN != 2000 ||
		!slices.Equal(cfg.sqliteConcurrency, []int{16, 64, 256}) || !slices.Equal(cfg.berthConcurrency, []int{16, 64, 256}) {
		t.Errorf("defaults %+v, %v; want both stores, 10000 on PostgreSQL and 2000 on SQLite, each at concurrency 16, 64 and 256", cfg, err)
	}
	cfg, err = parseConfig([]string{"-stores", "sqlite, sqlite", "-sqlite-n", "50"}, io.Discard)
	if err != nil || strings.Join(cfg.stores, ",") != "sqlite" || cfg.sqliteN != 50 {
		t.Errorf("-stores sqlite -sqlite-n 50: %+v, %v", cfg, err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-stores", "mysql"}, `-stores: "mysql" is not a store`},
		{[]string{"-stores", ""}, "-stores"},
		{[]string{"-sqlite-n", "0"}, "-sqlite-n must be at least 1"},
		{[]string{"-sqlite-concurrency", "0"}, "-sqlite-concurrency"},
	} {
		if _, err := parseConfig(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseConfig(%q) = %v; want an error containing %q", tc.args, err, tc.err)
		}
	}
}

// The bench's own SQL (the bulk insert, the ready count) and its reads through the store's
// API work on both stores.
// migratedRun is a run of kind on the database at url, migrated, with the bench's own
// connections to it and no agent; they are closed when t ends.
func migratedRun(t *testing.T, kind, url string) *berthRun {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := openSQL(kind, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &berthRun{kind: kind, url: url, sql: db, state: st}
}

// testStoreURL is a new empty database of kind for the test.
func testStoreURL(t *testing.T, kind string) string {
	if kind == storePostgres {
		return pgtest.New(t)
	}
	return "sqlite://" + filepath.Join(t.TempDir(), "berth.db")
}

func TestBenchSQLOnBothStores(t *testing.T) {
	for _, kind := range []string{storePostgres, storeSQLite} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			r := migratedRun(t, kind, testStoreURL(t, kind))
			db := r.sql
			if err := r.insert(ctx, "bench", 5); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `UPDATE resources SET status = 'ready', ready_at = created_at WHERE name IN ('bench-1', 'bench-3')`); err != nil {
				t.Fatal(err)
			}
			ready, err := r.ready(ctx, "bench")
			if err != nil || len(ready) != 2 {
				t.Fatalf("ready = %+v, %v; want bench-1 and bench-3", ready, err)
			}
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM resources WHERE name LIKE $1`, "bench-%").Scan(&n); err != nil || n != 5 {
				t.Errorf("inserted %d, %v; want 5", n, err)
			}
			if got := r.statusCounts(); got != "pending=3 ready=2" {
				t.Errorf("status counts %q; want pending=3 ready=2", got)
			}
		})
	}
}

func TestReportShowsStoresSideBySide(t *testing.T) {
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres, storeSQLite}, rate: 20}}
	lat := latencySummary{setting: "concurrency=16", n: 300, p50: 4 * time.Millisecond, p99: 9 * time.Millisecond, max: 10 * time.Millisecond}
	pg := rep.berthOn(storePostgres)
	pg.throughput = []throughputResult{{setting: "concurrency=16", parallel: 16, n: 10000, elapsed: 40 * time.Second, peakRSS: 50 << 20}}
	pg.latency = lat
	lite := rep.berthOn(storeSQLite)
	lite.throughput = []throughputResult{{setting: "concurrency=16", parallel: 16, n: 2000, elapsed: 20 * time.Second, peakRSS: 60 << 20}}
	if rep.berthOn(storeSQLite) != lite {
		t.Fatal("berthOn added a second SQLite entry")
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{
		"on PostgreSQL and SQLite vs River",
		"berth   sqlite    throughput, 2000 resources",
		"POSTGRESQL", "SQLITE",
		"250.0 resources/s (10000, concurrency=16)", "100.0 resources/s (2000, concurrency=16)",
		"4.0 ms / 9.0 ms", "50.0 MiB", "60.0 MiB",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "TARGET") {
		t.Errorf("report shows targets without River's figures:\n%s", out.String())
	}
	if strings.Contains(out.String(), "created_at->insert returned") || strings.Contains(out.String(), "split at the moment") {
		t.Errorf("report shows a split of the latency that was not measured:\n%s", out.String())
	}
}

// The targets name each ratio with its verdict: the standing 1x and the throughput issue's
// 4x of the Rill peer, and SQLite's throughput and p99 together.
func TestReportShowsTheTargets(t *testing.T) {
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres, storeSQLite}, rate: 20}}
	pg := rep.berthOn(storePostgres)
	pg.atDefault = -1
	pg.throughput = []throughputResult{{setting: "concurrency=256", parallel: 256, n: 10000, elapsed: 2 * time.Second}}
	pg.latency = latencySummary{setting: "concurrency=256", n: 300, p50: 2 * time.Millisecond, p99: 4 * time.Millisecond}
	lite := rep.berthOn(storeSQLite)
	lite.atDefault = -1
	lite.throughput = []throughputResult{{setting: "concurrency=256", parallel: 256, n: 2000, elapsed: time.Second}}
	lite.latency = latencySummary{setting: "concurrency=256", n: 300, p50: 2 * time.Millisecond, p99: 3 * time.Millisecond}
	lite.insertPart = latencySummary{setting: "concurrency=256", n: 300, p50: time.Millisecond, p99: 2 * time.Millisecond}
	lite.agentPart = latencySummary{setting: "concurrency=256", n: 300, p50: time.Millisecond, p99: 1500 * time.Microsecond}
	rep.river = []throughputResult{{setting: "max-workers=200", n: 10000, elapsed: 500 * time.Millisecond}}
	rep.riverLatency = latencySummary{setting: "max-workers=200", n: 300, p50: time.Millisecond, p99: 2 * time.Millisecond}
	rep.rill = []rillResult{{throughputResult: throughputResult{setting: "max-workers=200", n: 10000, elapsed: 5 * time.Second}}}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{
		"berth/rill-on-river >= 1.00 2.50 (5000.0 resources/s / 2000.0 resources/s at max-workers=200) PASS",
		"berth/rill-on-river >= 4.00 2.50 (5000.0 resources/s / 2000.0 resources/s at max-workers=200) MISS",
		"sqlite throughput >= 4000/s, p99 latency < 8.0 ms 2000.0 resources/s at concurrency=256, p99 3.0 ms (the client's insert alone: p99 2.0 ms) MISS",
		"berth sqlite latency of it created_at->insert returned, 300 at 20/s concurrency=256 p50 1.0 ms, p99 2.0 ms",
		"berth sqlite latency of it insert returned->ready, 300 at 20/s concurrency=256 p50 1.0 ms, p99 1.5 ms",
		"On SQLite the database clock is the host's",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRillFlags(t *testing.T) {
	flagsOnly(t)
	cfg, err := parseConfig(nil, io.Discard)
	if err != nil || !slices.Equal(cfg.rillWorkers, []int{10, 100, 200}) {
		t.Errorf("default -rill-workers: %v, %v; want 10,100,200", cfg.rillWorkers, err)
	}
	cfg, err = parseConfig([]string{"-rill-workers", ""}, io.Discard)
	if err != nil || len(cfg.rillWorkers) != 0 {
		t.Errorf(`-rill-workers "": %v, %v; want none`, cfg.rillWorkers, err)
	}
	if _, err := parseConfig([]string{"-rill-workers", "10,0"}, io.Discard); err == nil || !strings.Contains(err.Error(), "-rill-workers") {
		t.Errorf("-rill-workers 10,0: %v; want an error naming -rill-workers", err)
	}
}

// The peer provisions every resource once, each on a host of the pool with room, and the
// run reads its drain back from the database.
func TestRillPeerProvisionsEveryResource(t *testing.T) {
	ctx := context.Background()
	cfg := config{server: pgtest.New(t), n: 300, waitTimeout: 2 * time.Minute}
	res, err := rillThroughput(ctx, cfg, 8)
	if err != nil {
		t.Fatal(err)
	}
	if res.n != cfg.n || res.elapsed <= 0 || res.insert <= 0 || res.setting != "max-workers=8" {
		t.Errorf("result %+v; want %d resources inserted and drained in positive times at max-workers=8", res.throughputResult, cfg.n)
	}
	if res.overfilledHosts != 0 {
		t.Errorf("%d hosts overfilled with %d one-slot resources on %d slots", res.overfilledHosts, cfg.n, minHosts*slotsPerHost)
	}
}

func TestReportShowsRillTarget(t *testing.T) {
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres}, rate: 20}}
	lat := latencySummary{setting: "x", n: 300, p50: time.Millisecond, p99: 2 * time.Millisecond, max: 3 * time.Millisecond}
	pg := rep.berthOn(storePostgres)
	pg.throughput = []throughputResult{{setting: "concurrency=16", parallel: 16, n: 10000, elapsed: 10 * time.Second}}
	pg.latency = lat
	rep.river = []throughputResult{{setting: "max-workers=200", parallel: 200, n: 10000, elapsed: time.Second}}
	rep.riverLatency = lat
	rep.rill = []rillResult{
		{throughputResult: throughputResult{setting: "max-workers=10", parallel: 10, n: 10000, elapsed: 100 * time.Second}},
		{throughputResult: throughputResult{setting: "max-workers=100", parallel: 100, n: 10000, elapsed: 12500 * time.Millisecond}, overfilledHosts: 2},
	}
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{
		"800.0 resources/s (12.500 s after the insert's 0.000 s; hosts over their slots: 2)",
		"1.25 (1000.0 resources/s / 800.0 resources/s at max-workers=100)  PASS",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// The profile of a run is its database's statements, each per resource of the run. The
// test server preloads pg_stat_statements (scripts/pg-local.sh does for a cluster it creates):
// a server that does not makes the bench print how to get the profile, and this test fail.
func TestStatementProfileIsTheRunDatabasesStatements(t *testing.T) {
	ctx := context.Background()
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	db, err := createDatabase(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer db.drop()
	conn, err := pgx.Connect(ctx, db.url)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relpages >= $1`, 0).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)

	p := readStatementProfile(ctx, server, db.name, "resource", 5)
	if p.unavailable != "" {
		t.Fatalf("no profile: %s", p.unavailable)
	}
	var found []statementCost
	for _, s := range p.statements {
		if s.query == "SELECT count(*) FROM pg_class WHERE relpages >= $1" {
			found = append(found, s)
		}
	}
	if len(found) != 1 || found[0].calls != 2 || found[0].nested || found[0].rows != 1 {
		t.Fatalf("the statement run 10 times for 5 resources: %+v; want one entry of 2 calls per resource, 1 row each", found)
	}
	if other := readStatementProfile(ctx, server, "berth_bench_no_such_database", "resource", 5); other.unavailable != "" || len(other.statements) != 0 {
		t.Fatalf("another database's profile: %+v; want it empty", other)
	}
}

func TestStatementProfilePrintsSharesOfTheClientsStatements(t *testing.T) {
	p := statementProfile{unit: "resource", units: 1000, statements: []statementCost{
		{query: "UPDATE resources SET status = $1", calls: 2, meanUS: 150, perUnitUS: 300, rows: 1},
		{query: "INSERT INTO resource_events VALUES ($1)", nested: true, calls: 2, meanUS: 30, perUnitUS: 60, rows: 1},
		{query: "SELECT 1", calls: 1, meanUS: 100, perUnitUS: 100, rows: 1},
	}}
	var out strings.Builder
	p.print(&out, "concurrency=64")
	for _, want := range []string{
		"75%", "(15%)", "[trigger] INSERT INTO resource_events", "25%",
		"400 us of database time per resource", "1000 resources",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("profile lacks %q:\n%s", want, out.String())
		}
	}
	var missing strings.Builder
	statementProfile{unit: "resource", unavailable: "pg_stat_statements is not available"}.print(&missing, "concurrency=64")
	if !strings.Contains(missing.String(), "not measured: pg_stat_statements is not available") {
		t.Errorf("a missing profile prints %q", missing.String())
	}
}

// A timed insert's clock reading falls between the rows' creation and the commit that makes
// them visible: the drain is timed from it, the insert before it is not.
func TestTimedInsertReadsTheClockBeforeItsCommit(t *testing.T) {
	for _, kind := range []string{storePostgres, storeSQLite} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			r := migratedRun(t, kind, testStoreURL(t, kind))
			committing, err := r.insertTimed(ctx, "bench", 3)
			if err != nil {
				t.Fatal(err)
			}
			after, err := r.state.ListResources(ctx, domain.ListFilter{})
			if err != nil || len(after) != 3 {
				t.Fatalf("listed %d resources, %v; want the 3 inserted, committed", len(after), err)
			}
			for _, res := range after {
				if committing.Before(res.CreatedAt) {
					t.Errorf("%s created at %s, after the clock read before the commit (%s)", res.Name, res.CreatedAt, committing)
				}
			}
			var later time.Time
			if kind == storePostgres {
				err = r.sql.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&later)
			} else {
				later = time.Now()
			}
			if err != nil || later.Before(committing) {
				t.Errorf("the clock after the commit reads %s, %v; want at or after %s", later, err, committing)
			}
		})
	}
}

// The report shows each side's throughput counting its insert too, beside the drain the
// target compares.
func TestThroughputWithTheInsertCounted(t *testing.T) {
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres}, rate: 20}}
	pg := rep.berthOn(storePostgres)
	pg.throughput = []throughputResult{{setting: "concurrency=256", parallel: 256, n: 10000, elapsed: 2 * time.Second, insert: 500 * time.Millisecond}}
	pg.latency = latencySummary{setting: "concurrency=256", n: 300, p50: time.Millisecond, p99: 2 * time.Millisecond, max: 3 * time.Millisecond}
	rep.river = []throughputResult{{setting: "max-workers=200", parallel: 200, n: 10000, elapsed: time.Second, insert: 250 * time.Millisecond}}
	rep.riverLatency = pg.latency
	var out bytes.Buffer
	rep.print(&out)
	for _, want := range []string{
		"throughput ratio berth (concurrency=256)/river >= 0.35  0.50 (5000.0 resources/s / 10000.0 jobs/s)  PASS",
		"With each side's insert counted in its time, the throughput ratio is 0.50 (4000.0 resources/s / 8000.0 jobs/s).",
		"5000.0 resources/s (2.000 s after the insert's 0.500 s;",
		"10000.0 jobs/s (1.000 s after the insert's 0.250 s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// The throughput target compares River with Berth at the agent's default settings, not with
// its fastest fixed setting.
func TestThroughputTargetIsAtTheDefaultSettings(t *testing.T) {
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres}, rate: 20}}
	pg := rep.berthOn(storePostgres)
	pg.throughput = []throughputResult{
		{setting: "concurrency=256", parallel: 256, n: 10000, elapsed: 2 * time.Second},
		{setting: "default (16 to 256)", parallel: 256, n: 10000, elapsed: 4 * time.Second},
	}
	pg.atDefault = 1
	pg.latency = latencySummary{setting: "concurrency=256", n: 300, p50: time.Millisecond, p99: 2 * time.Millisecond, max: 3 * time.Millisecond}
	rep.river = []throughputResult{{setting: "max-workers=200", parallel: 200, n: 10000, elapsed: time.Second}}
	rep.riverLatency = latencySummary{setting: "max-workers=200", n: 300, p50: time.Millisecond, p99: 2 * time.Millisecond, max: 3 * time.Millisecond}
	var out bytes.Buffer
	rep.print(&out)
	want := "throughput ratio berth (default (16 to 256))/river >= 0.35  0.25 (2500.0 resources/s / 10000.0 jobs/s)  MISS"
	if !strings.Contains(out.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, out.String())
	}
}

// flagsOnly sets the environment parseConfig requires to values no run uses: a test that
// calls it checks the flags alone (any executable serves as the binaries).
func flagsOnly(t *testing.T) {
	t.Helper()
	t.Setenv("BERTH_BENCH_DATABASE_URL", "postgres://localhost/postgres")
	t.Setenv("BERTH_BINARY", "/bin/sh")
	t.Setenv("BERTH_BENCHBROKER_BINARY", "/bin/sh")
}
