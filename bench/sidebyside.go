package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// sideBySideResult is Berth's insert-to-ready and River's insert-to-start measured in one
// window (sideBySideLatency), with where each side's database time went.
type sideBySideResult struct {
	berth, river                     latencySummary
	berthStatements, riverStatements statementProfile
	berthStalls, riverStalls         stallShare // whether each side's slowest met the other's slow ones
}

// sideBySidePrefix names the resources of the side-by-side run.
const sideBySidePrefix = "side"

// sideBySideLatency measures Berth's insert-to-ready on PostgreSQL and River's
// insert-to-start in the same window: one agent at the setting of berth's run (fixed, or
// the agent's default settings) and one River client at
// maxWorkers run at once, each on its own database of the server, and their inserts
// alternate half a period apart, cfg.latencyN each at cfg.rate. Each latency run alone
// meets its own share of the machine's pauses: on 2 cores, either system's p99 moves
// between 3 and 20 ms from one window of 15 s to the next, so comparing two windows
// compares their pauses more than the two systems. Side by side, both meet the same ones.
func sideBySideLatency(ctx context.Context, cfg config, berth throughputResult, maxWorkers int) (res sideBySideResult, err error) {
	b, err := startBerth(ctx, cfg, storePostgres, berth.agentFleet(), cfg.latencyN)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, b.close()) }()
	rv, err := startRiver(ctx, cfg, maxWorkers, cfg.latencyN+1, addNoop)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, rv.close()) }()
	warmup, err := rv.startWarm(ctx, cfg)
	if err != nil {
		return res, err
	}
	err = paced(ctx, 2*cfg.latencyN, 2*cfg.rate, func(ctx context.Context, i int) error {
		if i%2 == 1 {
			_, err := rv.client.Insert(ctx, noopArgs{}, nil)
			return err
		}
		_, err := b.sql.ExecContext(ctx, `
			INSERT INTO resources (type, name, owner, args) VALUES ('runtime', $1, $2, '{"slots":1}')`,
			fmt.Sprintf("%s-%d", sideBySidePrefix, i/2), fmt.Sprintf("owner-%d", i/2%50))
		return err
	})
	if err != nil {
		return res, fmt.Errorf("insert side by side: %w", err)
	}
	if err := b.waitReady(ctx, cfg, sideBySidePrefix, cfg.latencyN); err != nil {
		return res, err
	}
	if err := rv.waitCompleted(ctx, cfg, cfg.latencyN); err != nil {
		return res, err
	}
	ready, err := b.ready(ctx, sideBySidePrefix)
	if err != nil {
		return res, err
	}
	berthTimed := make([]timedLatency, len(ready))
	for i, x := range ready {
		berthTimed[i] = timedLatency{at: x.CreatedAt, lat: x.ReadyAt.Sub(x.CreatedAt)}
	}
	riverTimed, err := rv.timedLatencies(ctx, warmup)
	if err != nil {
		return res, err
	}
	if res.berth, err = summarize(berth.setting, latenciesOf(berthTimed)); err != nil {
		return res, err
	}
	if res.river, err = summarize(fmt.Sprintf("max-workers=%d", maxWorkers), latenciesOf(riverTimed)); err != nil {
		return res, err
	}
	// Each side inserts every 1/rate, the two half a period apart: three quarters of a
	// period takes the other side's insert before and after each one.
	window := time.Duration(0.75 * float64(time.Second) / cfg.rate)
	res.berthStalls = sharedStalls(berthTimed, riverTimed, window)
	res.riverStalls = sharedStalls(riverTimed, berthTimed, window)
	// The server's time for each statement on the way, which the latencies include.
	res.berthStatements = readStatementProfile(ctx, cfg.server, b.dbName, "resource", cfg.latencyN)
	res.riverStatements = readStatementProfile(ctx, cfg.server, rv.db.name, "job", cfg.latencyN+1)
	slog.Info("side by side", "berth-p99", res.berth.p99.Round(100*time.Microsecond), "river-p99", res.river.p99.Round(100*time.Microsecond))
	return res, nil
}
