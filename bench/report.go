package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/berth-dev/berth/worker/healthcheck"
)

// report holds what has been measured so far; a zero latency summary was not measured.
type report struct {
	cfg          config
	berth        []throughputResult
	berthLatency latencySummary
	river        []throughputResult
	riverLatency latencySummary
	health       *healthResult
}

// print writes what was measured.
func (r *report) print(w io.Writer) {
	if r.cfg.compare {
		r.printComparison(w)
	}
	if r.health != nil {
		r.printHealth(w, *r.health)
	}
}

// printComparison writes the results table and, when both sides are measured, the targets.
func (r *report) printComparison(w io.Writer) {
	fmt.Fprintf(w, "\nBerth (static environ) vs River on one PostgreSQL server\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SYSTEM\tMEASUREMENT\tSETTING\tRESULT")
	for _, t := range r.berth {
		fmt.Fprintf(tw, "berth\tthroughput, %d resources\t%s\t%.1f resources/s (%.3f s; agent peak RSS %s)\n",
			t.n, t.setting, t.perSecond(), t.elapsed.Seconds(), mib(t.peakRSS))
	}
	r.printLatency(tw, "berth", "insert->ready", r.berthLatency)
	for _, t := range r.river {
		fmt.Fprintf(tw, "river\tthroughput, %d jobs\t%s\t%.1f jobs/s (%.3f s)\n",
			t.n, t.setting, t.perSecond(), t.elapsed.Seconds())
	}
	r.printLatency(tw, "river", "insert->start", r.riverLatency)
	tw.Flush()
	fmt.Fprintf(w, "\nLatencies are database-clock differences (berth: ready_at - created_at; river: attempted_at - created_at).\n")
	fmt.Fprintf(w, "River client: FetchCooldown %s, FetchPollInterval %s, LISTEN/NOTIFY wake-ups.\n\n",
		riverFetchCooldown, riverFetchPollInterval)
	if len(r.berth) == 0 || len(r.river) == 0 || r.berthLatency.n == 0 || r.riverLatency.n == 0 {
		return
	}
	r.printTargets(w)
}

func (r *report) printLatency(tw io.Writer, system, what string, l latencySummary) {
	if l.n == 0 {
		return
	}
	fmt.Fprintf(tw, "%s\tlatency %s, %d at %g/s\t%s\tp50 %s, p99 %s, max %s\n",
		system, what, l.n, r.cfg.rate, l.setting, ms(l.p50), ms(l.p99), ms(l.max))
}

func (r *report) printTargets(w io.Writer) {
	berth, river := fastest(r.berth), fastest(r.river)
	ratio := berth.perSecond() / river.perSecond()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tRESULT\t")
	fmt.Fprintf(tw, "throughput ratio berth/river >= %.2f\t%.2f (%.1f resources/s / %.1f jobs/s)\t%s\n",
		targetRatio, ratio, berth.perSecond(), river.perSecond(), verdict(ratio >= targetRatio))
	fmt.Fprintf(tw, "p99 latency berth < river\t%s vs %s\t%s\n",
		ms(r.berthLatency.p99), ms(r.riverLatency.p99), verdict(r.berthLatency.p99 < r.riverLatency.p99))
	tw.Flush()
}

// printHealth writes the health sweep's figures, per check where that says more.
func (r *report) printHealth(w io.Writer, h healthResult) {
	checks := h.checks()
	per := func(v int64) string { return fmt.Sprintf("%d (%.2f/check)", v, float64(v)/float64(checks)) }
	fmt.Fprintf(w, "\nHealth sweep: one round of the health checker over %d ready runtimes on %s\n", h.resources, plural(h.hosts, "local host"))
	fmt.Fprintf(w, "(concurrency %d, pages of %d, every check due at once; the environ's Check runs beside the checks)\n\n",
		h.concurrency, healthPageSize)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEASUREMENT\tRESULT")
	fmt.Fprintf(tw, "full sweep\t%.3f s, %.0f checks/s (resource checks done at %.3f s, environ Check at %.3f s)\n",
		h.elapsed.Seconds(), h.perSecond(), h.checksDone.Seconds(), h.environCheck.Seconds())
	results := make([]string, 0, len(h.results))
	for _, name := range []string{healthcheck.ResultHealthy, healthcheck.ResultRepaired, healthcheck.ResultUnhealthy, healthcheck.ResultError} {
		if n := h.results[name]; n > 0 {
			results = append(results, fmt.Sprintf("%s %d", name, n))
		}
	}
	fmt.Fprintf(tw, "results\t%s\n", strings.Join(results, ", "))
	var statements int64
	calls := make([]string, 0, len(h.calls))
	for _, name := range statementCalls {
		statements += h.calls[name]
		calls = append(calls, fmt.Sprintf("%s %d", name, h.calls[name]))
	}
	fmt.Fprintf(tw, "store calls\t%s statements (%s; RecordHealth %d)\n", per(statements), strings.Join(calls, ", "), h.calls["RecordHealth"])
	fmt.Fprintf(tw, "transactions\tcommitted %s, rolled back %d\n", per(h.db.xactCommit), h.db.xactRollback)
	fmt.Fprintf(tw, "rows\treturned %s, fetched %s, inserted %d, updated %d, deleted %d\n",
		per(h.db.tupReturned), per(h.db.tupFetched), h.db.tupInserted, h.db.tupUpdated, h.db.tupDeleted)
	fmt.Fprintf(tw, "blocks\thit %s, read %s\n", per(h.db.blksHit), per(h.db.blksRead))
	fmt.Fprintf(tw, "host probes\t%d (the environ reuses a host's result for a few seconds)\n", h.probes)
	fmt.Fprintf(tw, "bench CPU\t%.2f s (%.0f µs/check; worker, environ, database client and hosts)\n",
		h.cpu.Seconds(), float64(h.cpu.Microseconds())/float64(checks))
	tw.Flush()
	fmt.Fprintf(w, "\nDatabase figures are pg_stat_database deltas for the sweep's database, read once its sessions closed.\n\n")
}

func verdict(met bool) string {
	if met {
		return "PASS"
	}
	return "MISS"
}

// plural returns "1 host", "2 hosts" and the like.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
