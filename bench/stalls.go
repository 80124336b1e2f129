package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// timedLatency is one runtime's or job's latency, and when it was inserted (created_at).
type timedLatency struct {
	at  time.Time
	lat time.Duration
}

// latenciesOf returns the latencies of sample.
func latenciesOf(sample []timedLatency) []time.Duration {
	out := make([]time.Duration, len(sample))
	for i, s := range sample {
		out[i] = s.lat
	}
	return out
}

// timedDurations runs a query returning created_at and a latency in seconds.
func timedDurations(ctx context.Context, pool *pgxpool.Pool, query string, args ...any) ([]timedLatency, error) {
	rows, _ := pool.Query(ctx, query, args...)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (timedLatency, error) {
		var (
			at      time.Time
			seconds float64
		)
		err := row.Scan(&at, &seconds)
		return timedLatency{at: at, lat: time.Duration(seconds * float64(time.Second))}, err
	})
	if err != nil {
		return nil, fmt.Errorf("read latencies: %w", err)
	}
	return out, nil
}

// stallShare says whether one side's slowest samples of a side-by-side run met the other
// side's slow ones. A pause of the whole machine (the disk, another process, the server)
// slows what both sides insert around it; a pause of one system's own slows only its side.
type stallShare struct {
	slowest int // the side's slowest 1% (at least one sample)
	beside  int // of them, those the other side's slowest 10% were inserted beside
	// all is the share of all the side's samples the other side's slowest 10% were inserted
	// beside: what chance alone gives the slowest.
	all float64
}

// sharedStalls measures stallShare for side against other, each sample's neighbours being
// the other side's samples inserted within window of it.
func sharedStalls(side, other []timedLatency, window time.Duration) stallShare {
	if len(side) == 0 || len(other) == 0 {
		return stallShare{}
	}
	byTime := slices.SortedFunc(slices.Values(other), func(a, b timedLatency) int { return a.at.Compare(b.at) })
	slowestOf := func(sample []timedLatency, share float64) []timedLatency {
		sorted := slices.SortedStableFunc(slices.Values(sample), func(a, b timedLatency) int { return cmp.Compare(b.lat, a.lat) })
		return sorted[:max(int(share*float64(len(sorted))), 1)]
	}
	slow := make(map[timedLatency]bool)
	for _, o := range slowestOf(other, 0.1) {
		slow[o] = true
	}
	besideSlow := func(s timedLatency) bool {
		i, _ := slices.BinarySearchFunc(byTime, s.at.Add(-window), func(o timedLatency, t time.Time) int { return o.at.Compare(t) })
		for ; i < len(byTime) && !byTime[i].at.After(s.at.Add(window)); i++ {
			if slow[byTime[i]] {
				return true
			}
		}
		return false
	}
	var all int
	for _, s := range side {
		if besideSlow(s) {
			all++
		}
	}
	slowest := slowestOf(side, 0.01)
	res := stallShare{slowest: len(slowest), all: float64(all) / float64(len(side))}
	for _, s := range slowest {
		if besideSlow(s) {
			res.beside++
		}
	}
	return res
}

// printSharedStalls writes, for each side of the side-by-side run, how many of its slowest
// samples met the other side's slow ones.
func printSharedStalls(w io.Writer, s *sideBySideResult) {
	if s.berthStalls.slowest == 0 || s.riverStalls.slowest == 0 {
		return
	}
	fmt.Fprintf(w, "Side by side, which of the slowest were the machine's: a runtime or job counts as beside the other side's slow ones when one of the other side's slowest 10%% was inserted next to it (the inserts alternate).\n")
	for _, side := range []struct {
		name, other string
		share       stallShare
	}{{"berth", "river", s.berthStalls}, {"river", "berth", s.riverStalls}} {
		fmt.Fprintf(w, "  %s's slowest %d: %d beside %s's slow ones (of all %s's: %.0f%%, what chance gives)\n",
			side.name, side.share.slowest, side.share.beside, side.other, side.name, 100*side.share.all)
	}
}
