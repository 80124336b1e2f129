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
	berth        []*berthResults // in the order of cfg.stores
	river        []throughputResult
	rill         []rillResult
	riverLatency latencySummary
	sideBySide   *sideBySideResult // nil when not measured
	scaling      []scalingResult   // in the order of cfg.agentCounts
	failover     *failoverResult
	backlog      *backlogResult
	health       *healthResult
	fairness     []fairnessResult // in the order of cfg.fairAgents
	sleep        []scalingResult  // the sleep broker's runs, in the order of cfg.sleepAgents
}

// berthResults are Berth's figures on one store.
type berthResults struct {
	store      string
	throughput []throughputResult
	latency    latencySummary
	// insertPart and agentPart split latency, where the store's clock is the bench's (SQLite):
	// the inserting client's part, from created_at to its insert's return, and the agent's,
	// from that return to ready_at. Zero when not measured.
	insertPart, agentPart latencySummary
	// atDefault is the index in throughput of the run at the agent's default settings; -1
	// when there is none.
	atDefault int
}

// defaultRun is the run at the agent's default settings, else the fastest.
func (b *berthResults) defaultRun() throughputResult {
	if b.atDefault >= 0 && b.atDefault < len(b.throughput) {
		return b.throughput[b.atDefault]
	}
	return fastest(b.throughput)
}

// berthOn returns the results on store kind, adding them when new.
func (r *report) berthOn(kind string) *berthResults {
	if res := r.berthResults(kind); res != nil {
		return res
	}
	res := &berthResults{store: kind, atDefault: -1}
	r.berth = append(r.berth, res)
	return res
}

// berthResults returns the results on store kind, or nil.
func (r *report) berthResults(kind string) *berthResults {
	for _, res := range r.berth {
		if res.store == kind {
			return res
		}
	}
	return nil
}

// print writes what was measured.
func (r *report) print(w io.Writer) {
	printFairness(w, r.fairness)
	if r.cfg.compare {
		r.printComparison(w)
		r.printScaling(w)
		if r.failover != nil {
			printFailover(w, *r.failover)
		}
		r.printSleep(w)
		if r.backlog != nil {
			printBacklog(w, *r.backlog)
		}
	}
	if r.health != nil {
		r.printHealth(w, *r.health)
	}
}

// printComparison writes the results table, Berth's stores side by side and, when Berth on
// PostgreSQL and River are both measured, the targets.
func (r *report) printComparison(w io.Writer) {
	fmt.Fprintf(w, "\nBerth (static environ) on %s vs River on PostgreSQL\n\n", storeNames(r.cfg.stores))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SYSTEM\tSTORE\tMEASUREMENT\tSETTING\tRESULT")
	for _, b := range r.berth {
		for _, t := range b.throughput {
			fmt.Fprintf(tw, "berth\t%s\tthroughput, %d resources\t%s\t%.1f resources/s (%.3f s after the insert's %.3f s; agent peak RSS %s, CPU %s%s)\n",
				b.store, t.n, t.setting, t.perSecond(), t.elapsed.Seconds(), t.insert.Seconds(), mib(t.peakRSS), t.cpuPerResource(), t.roundsNote())
		}
		r.printLatency(tw, "berth", b.store, "insert->ready", b.latency)
		r.printLatency(tw, "berth", b.store, "  of it created_at->insert returned", b.insertPart)
		r.printLatency(tw, "berth", b.store, "  of it insert returned->ready", b.agentPart)
	}
	for _, t := range r.river {
		fmt.Fprintf(tw, "river\tpostgres\tthroughput, %d jobs\t%s\t%.1f jobs/s (%.3f s after the insert's %.3f s%s)\n",
			t.n, t.setting, t.perSecond(), t.elapsed.Seconds(), t.insert.Seconds(), t.roundsNote())
	}
	r.printLatency(tw, "river", storePostgres, "insert->start", r.riverLatency)
	if s := r.sideBySide; s != nil {
		r.printLatency(tw, "berth", storePostgres, "insert->ready side by side", s.berth)
		r.printLatency(tw, "river", storePostgres, "insert->start side by side", s.river)
	}
	for _, t := range r.rill {
		fmt.Fprintf(tw, "rill-on-river	postgres	throughput, %d resources	%s	%.1f resources/s (%.3f s after the insert's %.3f s; hosts over their slots: %d%s)\n",
			t.n, t.setting, t.perSecond(), t.elapsed.Seconds(), t.insert.Seconds(), t.overfilledHosts, t.roundsNote())
	}
	tw.Flush()
	fmt.Fprintf(w, "\nThroughput is a drain: from the moment the inserted rows or jobs can be seen (berth: the database clock in the insert's transaction, just before its COMMIT; river and rill-on-river: the client's start, after the insert returned) to the last ready or completed.\n")
	fmt.Fprintf(w, "Latencies are database-clock differences (berth: ready_at - created_at, to the millisecond on SQLite; river: attempted_at - created_at).\n")
	if r.splitsLatency() {
		fmt.Fprintf(w, "On SQLite the database clock is the host's, so Berth's latency is also split at the moment the client's insert returned: before it, the insert's triggers and its durable commit (synchronous=FULL); after it, the agent.\n")
	}
	fmt.Fprintf(w, "River client: FetchCooldown %s, FetchPollInterval %s, LISTEN/NOTIFY wake-ups.\n\n",
		riverFetchCooldown, riverFetchPollInterval)
	r.printStores(w)
	pg := r.berthResults(storePostgres)
	if pg == nil || len(pg.throughput) == 0 {
		return
	}
	if best := fastest(pg.throughput); best.statements != nil {
		best.statements.print(w, best.setting)
	}
	if s := r.sideBySide; s != nil {
		printSharedStalls(w, s)
		s.berthStatements.print(w, "berth's insert-to-ready side by side, "+s.berth.setting)
		s.riverStatements.print(w, "river's insert-to-start side by side, "+s.river.setting)
	}
	if len(r.river) == 0 || pg.latency.n == 0 || r.riverLatency.n == 0 {
		return
	}
	r.printTargets(w, pg)
}

// splitsLatency reports whether a store's latency run was split at the insert's return.
func (r *report) splitsLatency() bool {
	for _, b := range r.berth {
		if b.insertPart.n > 0 {
			return true
		}
	}
	return false
}

func (r *report) printLatency(tw io.Writer, system, store, what string, l latencySummary) {
	if l.n == 0 {
		return
	}
	fmt.Fprintf(tw, "%s\t%s\tlatency %s, %d at %g/s\t%s\tp50 %s, p99 %s, max %s\n",
		system, store, what, l.n, r.cfg.rate, l.setting, ms(l.p50), ms(l.p99), ms(l.max))
}

// printStores writes Berth's figures on each store side by side: each store's fastest
// throughput run and its latency run.
func (r *report) printStores(w io.Writer) {
	var measured []*berthResults
	for _, b := range r.berth {
		if len(b.throughput) > 0 {
			measured = append(measured, b)
		}
	}
	if len(measured) == 0 {
		return
	}
	fmt.Fprintf(w, "Berth by store (the fastest throughput run of each):\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(label string, cell func(*berthResults) string) {
		fmt.Fprint(tw, label)
		for _, b := range measured {
			fmt.Fprint(tw, "\t", cell(b))
		}
		fmt.Fprintln(tw)
	}
	row("", func(b *berthResults) string { return strings.ToUpper(storeName(b.store)) })
	row("throughput", func(b *berthResults) string {
		best := fastest(b.throughput)
		return fmt.Sprintf("%.1f resources/s (%d, %s)", best.perSecond(), best.n, best.setting)
	})
	row("latency p50 / p99", func(b *berthResults) string {
		if b.latency.n == 0 {
			return "-"
		}
		return fmt.Sprintf("%s / %s", ms(b.latency.p50), ms(b.latency.p99))
	})
	row("agent peak RSS", func(b *berthResults) string { return mib(fastest(b.throughput).peakRSS) })
	row("agent CPU", func(b *berthResults) string { return fastest(b.throughput).cpuPerResource() })
	tw.Flush()
	fmt.Fprintln(w)
}

func (r *report) printTargets(w io.Writer, pg *berthResults) {
	berth, river := fastest(pg.throughput), fastest(r.river)
	atDefault := pg.defaultRun()
	ratio := atDefault.perSecond() / river.perSecond()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tRESULT\t")
	fmt.Fprintf(tw, "throughput ratio berth (%s)/river >= %.2f\t%.2f (%.1f resources/s / %.1f jobs/s)\t%s\n",
		atDefault.setting, targetRatio, ratio, atDefault.perSecond(), river.perSecond(), verdict(ratio >= targetRatio))
	if s := r.sideBySide; s != nil {
		fmt.Fprintf(tw, "p99 latency berth <= river, side by side\t%s vs %s (each alone: %s vs %s)\t%s\n",
			ms(s.berth.p99), ms(s.river.p99), ms(pg.latency.p99), ms(r.riverLatency.p99), verdict(s.berth.p99 <= s.river.p99))
	} else {
		fmt.Fprintf(tw, "p99 latency berth <= river, each alone\t%s vs %s\t%s\n",
			ms(pg.latency.p99), ms(r.riverLatency.p99), verdict(pg.latency.p99 <= r.riverLatency.p99))
	}
	if len(r.rill) > 0 {
		runs := make([]throughputResult, len(r.rill))
		for i, run := range r.rill {
			runs[i] = run.throughputResult
		}
		peer := fastest(runs)
		ratio := berth.perSecond() / peer.perSecond()
		for _, target := range []float64{targetRillRatio, targetRillRatioAhead} {
			fmt.Fprintf(tw, "throughput ratio berth/rill-on-river >= %.2f\t%.2f (%.1f resources/s / %.1f resources/s at %s)\t%s\n",
				target, ratio, berth.perSecond(), peer.perSecond(), peer.setting, verdict(ratio >= target))
		}
	}
	if sq := r.berthResults(storeSQLite); sq != nil && len(sq.throughput) > 0 && sq.latency.n > 0 {
		best := fastest(sq.throughput)
		insertPart := ""
		if sq.insertPart.n > 0 {
			insertPart = fmt.Sprintf(" (the client's insert alone: p99 %s)", ms(sq.insertPart.p99))
		}
		fmt.Fprintf(tw, "sqlite throughput >= %d/s, p99 latency < %s\t%.1f resources/s at %s, p99 %s%s\t%s\n",
			targetSQLite, ms(targetSQLiteP99), best.perSecond(), best.setting, ms(sq.latency.p99), insertPart,
			verdict(best.perSecond() >= targetSQLite && sq.latency.p99 < targetSQLiteP99))
	}
	tw.Flush()
	if atDefault.insert > 0 && river.insert > 0 {
		fmt.Fprintf(w, "\nWith each side's insert counted in its time, the throughput ratio is %.2f (%.1f resources/s / %.1f jobs/s).\n",
			atDefault.perSecondWithInsert()/river.perSecondWithInsert(), atDefault.perSecondWithInsert(), river.perSecondWithInsert())
	}
}

// printScaling writes the throughput runs of several agents on one PostgreSQL database side
// by side and, with a one-agent run among them, the target that adding agents keeps it.
func (r *report) printScaling(w io.Writer) {
	if len(r.scaling) == 0 {
		return
	}
	fmt.Fprintf(w, "\nBerth (static environ) with several agents on one PostgreSQL database: a burst of -agents-n resources each")
	if r.cfg.agentsRounds > 1 {
		fmt.Fprintf(w, ", the fastest of %d rounds", r.cfg.agentsRounds)
	}
	fmt.Fprintf(w, "\n\n")
	best := fastestByAgents(r.scaling)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENTS\tSETTING\tTHROUGHPUT\tINSERT->READY\tPEAK RSS\tCPU (ALL AGENTS)")
	for _, s := range best {
		fmt.Fprintf(tw, "%d\tconcurrency=%d each\t%.1f resources/s (%d in %.3f s)\tp50 %s, p99 %s, max %s\t%s per agent at most\t%s\n",
			s.agents, s.throughput.parallel, s.throughput.perSecond(), s.throughput.n, s.throughput.elapsed.Seconds(),
			ms(s.latency.p50), ms(s.latency.p99), ms(s.latency.max), mib(s.throughput.peakRSS), s.throughput.cpuPerResource())
	}
	tw.Flush()
	fmt.Fprintf(w, "\nInsert->ready is each resource's ready_at - created_at within its burst (all inserted at once).\n\n")
	ratios := scalingRatios(best)
	if len(ratios) == 0 {
		return
	}
	var one float64
	for _, s := range best {
		if s.agents == 1 {
			one = s.throughput.perSecond()
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET (several agents on PostgreSQL)\tRESULT\t")
	for _, s := range best {
		ratio, ok := ratios[s.agents]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "throughput with %d agents / with 1 >= %.2f\t%.2f (%.1f resources/s / %.1f resources/s)\t%s\n",
			s.agents, targetScaling, ratio, s.throughput.perSecond(), one, verdict(ratio >= targetScaling))
	}
	tw.Flush()
}

// printFailover writes the failover run's figures.
func printFailover(w io.Writer, f failoverResult) {
	fmt.Fprintf(w, "\nFailover: %d agents (--agent-ttl %s, --heartbeat-interval %s) drain a burst of %d resources;\n",
		f.agents, f.agentTTL, f.heartbeat, f.n)
	fmt.Fprintf(w, "%s, holding the most leases (or, when none holds any, the first agent), is killed with SIGKILL once %d are ready and never restarted\n\n", f.victim, f.readyAtKill)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEASUREMENT\tRESULT")
	fmt.Fprintf(tw, "resources the killed agent held or was to provision\t%d\n", f.held)
	fmt.Fprintf(tw, "kill -> its resources ready again\t%.3f s (the first at %.3f s)\n", f.heldReady.Seconds(), f.firstTakenOver.Seconds())
	fmt.Fprintf(tw, "kill -> the whole burst ready\t%.3f s\n", f.allReady.Seconds())
	fmt.Fprintf(tw, "burst, insert -> all ready\t%.3f s\n", f.burst.Seconds())
	fmt.Fprintf(tw, "leases left to the killed agent\t%d\n", f.leftHeld)
	tw.Flush()
	fmt.Fprintf(w, "\nTimes are database-clock differences from the kill (read once the process was gone) to ready_at.\n\n")
}

// storeName is a store's name for people.
func storeName(kind string) string {
	if kind == storeSQLite {
		return "SQLite"
	}
	return "PostgreSQL"
}

// storeNames is e.g. "PostgreSQL and SQLite".
func storeNames(kinds []string) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = storeName(k)
	}
	return strings.Join(names, " and ")
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
