package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"text/tabwriter"
	"time"
)

// Fairness targets: a small owner's runtime created just after another owner's burst is
// ready within targetFairRatio times its insert-to-ready on an idle agent, and within
// targetFairWait.
const (
	targetFairRatio = 5.0
	targetFairWait  = time.Second
	// fairIdleSamples is how many runtimes the idle insert-to-ready is the median of.
	fairIdleSamples = 5
	// fairLateBy is how long after the start of the burst's insert the small owner inserts.
	fairLateBy = 300 * time.Millisecond
	// The owners of the fairness runs.
	fairOwnerA = "owner-a"
	fairOwnerB = "owner-b"
)

// fairnessResult is one fairness run: owner A's burst of n runtimes, owner B's one runtime
// inserted fairLateBy after the burst began.
type fairnessResult struct {
	agents, n   int
	concurrency int
	idle        time.Duration    // B's insert-to-ready on the idle agents: the median of fairIdleSamples
	late        time.Duration    // B's insert-to-ready behind A's burst
	aheadOfB    int              // of A's burst, those ready before B's runtime
	burstInsert time.Duration    // how long the burst's INSERT took (B's waits for it when longer than fairLateBy)
	burst       throughputResult // A's burst, from its insert to its last ready
}

// fairnessRuns runs the fairness measurement once per agent count of -fair-agents.
func fairnessRuns(ctx context.Context, cfg config, rep *report) error {
	for _, k := range cfg.fairAgents {
		res, err := fairness(ctx, cfg, k)
		if err != nil {
			return fmt.Errorf("fairness with %s: %w", plural(k, "agent"), err)
		}
		rep.fairness = append(rep.fairness, res)
	}
	return nil
}

// fairness starts k agents on a fresh PostgreSQL database with a static pool of room for
// everything, times owner B's runtimes on the idle agents, then inserts owner A's burst of
// cfg.fairN runtimes in one statement and B's runtime fairLateBy after the burst began, and
// times B's runtime and A's burst to ready (database timestamps).
func fairness(ctx context.Context, cfg config, k int) (res fairnessResult, err error) {
	res = fairnessResult{agents: k, n: cfg.fairN, concurrency: cfg.agentConcurrency}
	f := fleet{agents: k, concurrency: cfg.agentConcurrency}
	r, err := startBerth(ctx, cfg, storePostgres, f, cfg.fairN+fairIdleSamples+1)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	r.poll = 20 * time.Millisecond
	idle := make([]time.Duration, 0, fairIdleSamples)
	for i := range fairIdleSamples {
		prefix := fmt.Sprintf("fair-idle%d", i)
		if err := r.insertOwned(ctx, prefix, fairOwnerB, 1); err != nil {
			return res, err
		}
		if err := r.waitReady(ctx, cfg, prefix, 1); err != nil {
			return res, err
		}
		lat, err := r.insertToReady(ctx, prefix)
		if err != nil {
			return res, err
		}
		idle = append(idle, lat...)
	}
	slices.Sort(idle)
	res.idle = idle[len(idle)/2]

	r.poll = 0
	began := time.Now()
	if err := r.insertOwned(ctx, "fair-a", fairOwnerA, cfg.fairN); err != nil {
		return res, err
	}
	res.burstInsert = time.Since(began)
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(time.Until(began.Add(fairLateBy))):
	}
	if err := r.insertOwned(ctx, "fair-b", fairOwnerB, 1); err != nil {
		return res, err
	}
	if err := r.waitReady(ctx, cfg, "fair-b", 1); err != nil {
		return res, err
	}
	if err := r.waitReady(ctx, cfg, "fair-a", cfg.fairN); err != nil {
		return res, err
	}
	late, err := r.insertToReady(ctx, "fair-b")
	if err != nil {
		return res, err
	}
	res.late = late[0]
	if err := r.sql.QueryRowContext(ctx, `
		SELECT count(*) FROM resources
		 WHERE name LIKE 'fair-a-%' AND ready_at < (SELECT ready_at FROM resources WHERE name = 'fair-b-0')`).Scan(&res.aheadOfB); err != nil {
		return res, fmt.Errorf("count the burst's runtimes ready before B's: %w", err)
	}
	ready, err := r.ready(ctx, "fair-a")
	if err != nil {
		return res, err
	}
	res.burst.elapsed, _ = readySpan(ready)
	res.burst.n = len(ready)
	if res.burst.peakRSS, err = r.peakRSS(); err != nil {
		return res, err
	}
	slog.Info("berth fairness", "agents", k, "burst", res.n, "idle", res.idle.Round(time.Millisecond),
		"late", res.late.Round(time.Millisecond), "ahead-of-b", res.aheadOfB, "burst-insert", res.burstInsert.Round(time.Millisecond), "burst-elapsed", res.burst.elapsed.Round(time.Millisecond))
	return res, nil
}

// insertOwned adds n runtime resources of owner named prefix-0 … prefix-(n-1) in one
// statement (PostgreSQL).
func (r *berthRun) insertOwned(ctx context.Context, prefix, owner string, n int) error {
	_, err := r.sql.ExecContext(ctx, `
		INSERT INTO resources (type, name, owner, args)
		SELECT 'runtime', $1 || '-' || i, $3, '{"slots":1}' FROM generate_series(0, $2 - 1) AS i`, prefix, n, owner)
	if err != nil {
		return fmt.Errorf("insert %d resources of %s: %w", n, owner, err)
	}
	return nil
}

// insertToReady is ready_at - created_at of each ready resource named prefix-*.
func (r *berthRun) insertToReady(ctx context.Context, prefix string) ([]time.Duration, error) {
	ready, err := r.ready(ctx, prefix)
	if err != nil {
		return nil, err
	}
	if len(ready) == 0 {
		return nil, fmt.Errorf("no %s resource is ready", prefix)
	}
	out := make([]time.Duration, len(ready))
	for i, x := range ready {
		out[i] = x.ReadyAt.Sub(x.CreatedAt)
	}
	return out, nil
}

// printFairness writes the fairness runs and their targets.
func printFairness(w io.Writer, runs []fairnessResult) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFairness between owners (static environ on PostgreSQL): owner A inserts a burst, owner B one runtime %s later\n\n", fairLateBy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENTS\tBURST\tB IDLE (median of 5)\tB BEHIND THE BURST\tRATIO\tA READY BEFORE B\tA's BURST THROUGHPUT\tTARGET")
	for _, f := range runs {
		ratio := f.late.Seconds() / f.idle.Seconds()
		met := "met"
		if ratio > targetFairRatio || f.late >= targetFairWait {
			met = "MISSED"
		}
		fmt.Fprintf(tw, "%d (concurrency %d each)\t%d\t%s\t%s\t%.1fx\t%d\t%.1f resources/s (%.3f s)\t%s (at most %.0fx idle and under %s)\n",
			f.agents, f.concurrency, f.n, f.idle.Round(time.Millisecond/10), f.late.Round(time.Millisecond/10), ratio,
			f.aheadOfB, f.burst.perSecond(), f.burst.elapsed.Seconds(), met, targetFairRatio, targetFairWait)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nTimes are database-clock differences (ready_at - created_at). A's throughput is n / (last ready_at - first created_at).")
}
