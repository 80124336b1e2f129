package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
	"github.com/berth-dev/berth/internal/pgtest"
)

// Side by side, the real agent and a River client each take every one of their inserts,
// and the run reads each side's latencies from its own database.
func TestSideBySideLatencyMeasuresBothSystems(t *testing.T) {
	cfg := config{server: pgtest.New(t), binary: e2etest.Binary(t), latencyN: 10, rate: 50, waitTimeout: 2 * time.Minute}
	res, err := sideBySideLatency(context.Background(), cfg, throughputResult{setting: "concurrency=16", parallel: 16}, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		name, setting string
		l             latencySummary
	}{{"berth", "concurrency=16", res.berth}, {"river", "max-workers=8", res.river}} {
		if side.l.n != cfg.latencyN || side.l.setting != side.setting {
			t.Errorf("%s: %d latencies at %q; want %d at %q", side.name, side.l.n, side.l.setting, cfg.latencyN, side.setting)
		}
		if side.l.p50 <= 0 || side.l.p50 > side.l.p99 || side.l.p99 > side.l.max {
			t.Errorf("%s: p50 %s, p99 %s, max %s; want 0 < p50 <= p99 <= max", side.name, side.l.p50, side.l.p99, side.l.max)
		}
	}
	// Each side's slowest sample is looked up among the other's: of 10, one.
	if res.berthStalls.slowest != 1 || res.riverStalls.slowest != 1 {
		t.Errorf("slowest samples measured against the other side: berth %+v, river %+v; want one each", res.berthStalls, res.riverStalls)
	}
	// Each side's profile is its own database's: the client's insert once per resource on
	// Berth's, and none of it on River's.
	const insert = "INSERT INTO resources (type, name, owner, args) VALUES ($3, $1, $2, $4)"
	for _, side := range []struct {
		name, unit string
		p          statementProfile
		want       float64
	}{{"berth", "resource", res.berthStatements, 1}, {"river", "job", res.riverStatements, 0}} {
		if side.p.unavailable != "" || side.p.unit != side.unit || len(side.p.statements) == 0 {
			t.Fatalf("%s's profile: %+v; want one per %s", side.name, side.p, side.unit)
		}
		var calls float64
		for _, st := range side.p.statements {
			if st.query == insert && !st.nested {
				calls += st.calls
			}
		}
		if calls != side.want {
			t.Errorf("%s's profile has the client's insert %v times per %s; want %v", side.name, calls, side.unit, side.want)
		}
	}
}

// The p99 target compares the side-by-side run when there is one, and shows the runs
// alone beside it; without it, the runs alone decide.
func TestReportComparesP99SideBySide(t *testing.T) {
	lat := func(p99 time.Duration) latencySummary {
		return latencySummary{setting: "x", n: 300, p50: time.Millisecond, p99: p99, max: 20 * time.Millisecond}
	}
	rep := &report{cfg: config{compare: true, stores: []string{storePostgres}, rate: 20}}
	pg := rep.berthOn(storePostgres)
	pg.throughput = []throughputResult{{setting: "concurrency=16", parallel: 16, n: 10000, elapsed: 2 * time.Second}}
	pg.latency = lat(4 * time.Millisecond)
	rep.river = []throughputResult{{setting: "max-workers=200", parallel: 200, n: 10000, elapsed: time.Second}}
	rep.riverLatency = lat(9 * time.Millisecond)

	var out bytes.Buffer
	rep.print(&out)
	if got := strings.Join(strings.Fields(out.String()), " "); !strings.Contains(got, "p99 latency berth <= river, each alone 4.0 ms vs 9.0 ms PASS") {
		t.Errorf("report without a side-by-side run lacks the runs alone's verdict:\n%s", out.String())
	}

	rep.sideBySide = &sideBySideResult{
		berth: lat(5 * time.Millisecond), river: lat(3 * time.Millisecond),
		berthStatements: statementProfile{unit: "resource", units: 300, statements: []statementCost{
			{query: "UPDATE resources SET status = $1", calls: 1, meanUS: 500, perUnitUS: 500, rows: 1},
		}},
		riverStatements: statementProfile{unit: "job", unavailable: "no server"},
	}
	out.Reset()
	rep.print(&out)
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"berth postgres latency insert->ready side by side, 300 at 20/s x p50 1.0 ms, p99 5.0 ms",
		"river postgres latency insert->start side by side, 300 at 20/s x p50 1.0 ms, p99 3.0 ms",
		"p99 latency berth <= river, side by side 5.0 ms vs 3.0 ms (each alone: 4.0 ms vs 9.0 ms) MISS",
		"Where a resource's database time goes on PostgreSQL (pg_stat_statements, berth's insert-to-ready side by side, x):",
		"CALLS/RESOURCE US/CALL US/RESOURCE SHARE ROWS/CALL STATEMENT 1.000 500.0 500.0 100% 1.0 UPDATE resources SET status = $1",
		"Where a job's database time goes on PostgreSQL (pg_stat_statements, river's insert-to-start side by side, x): not measured: no server",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSideBySideFlag(t *testing.T) {
	flagsOnly(t)
	if cfg, err := parseConfig(nil, io.Discard); err != nil || !cfg.sideBySide {
		t.Errorf("default -side-by-side: %v, %v; want true", cfg.sideBySide, err)
	}
	if cfg, err := parseConfig([]string{"-side-by-side=false"}, io.Discard); err != nil || cfg.sideBySide {
		t.Errorf("-side-by-side=false: %v, %v; want false", cfg.sideBySide, err)
	}
}

// On SQLite, whose clock is the host's, each latency is split where the client's insert
// returned, the two parts adding up to it; on PostgreSQL it is not split.
func TestLatencyIsSplitAtTheInsertsReturnOnSQLite(t *testing.T) {
	binary := e2etest.Binary(t)
	for _, kind := range []string{storePostgres, storeSQLite} {
		t.Run(kind, func(t *testing.T) {
			cfg := config{binary: binary, latencyN: 10, rate: 50, waitTimeout: 2 * time.Minute}
			if kind == storePostgres {
				cfg.server = pgtest.New(t)
			}
			run, err := berthLatency(context.Background(), cfg, kind, oneAgent(16))
			if err != nil {
				t.Fatal(err)
			}
			if len(run.ready) != cfg.latencyN {
				t.Fatalf("%d latencies; want %d", len(run.ready), cfg.latencyN)
			}
			if kind == storePostgres {
				if run.insert != nil || run.agent != nil {
					t.Errorf("split on PostgreSQL: %v and %v", run.insert, run.agent)
				}
				return
			}
			if len(run.insert) != cfg.latencyN || len(run.agent) != cfg.latencyN {
				t.Fatalf("%d and %d parts; want %d each", len(run.insert), len(run.agent), cfg.latencyN)
			}
			for i, total := range run.ready {
				if run.insert[i] <= -time.Millisecond || run.insert[i]+run.agent[i] != total {
					t.Errorf("resource %d: insert %s + agent %s; want a part after created_at adding up to %s", i, run.insert[i], run.agent[i], total)
				}
			}
		})
	}
}
