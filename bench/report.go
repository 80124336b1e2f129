package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// report holds what has been measured so far; a zero latency summary was not measured.
type report struct {
	cfg          config
	berth        []throughputResult
	berthLatency latencySummary
	river        []throughputResult
	riverLatency latencySummary
}

// print writes the results table and, when both sides are measured, the targets.
func (r *report) print(w io.Writer) {
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

func verdict(met bool) string {
	if met {
		return "PASS"
	}
	return "MISS"
}
