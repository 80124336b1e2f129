package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// paced calls insert n times, at most rate times a second, stopping at the first error.
func paced(ctx context.Context, n int, rate float64, insert func(ctx context.Context, i int) error) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i := range n {
		if err := insert(ctx, i); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// latencySummary is the distribution of a latency sample.
type latencySummary struct {
	setting       string
	n             int
	p50, p99, max time.Duration
}

func summarize(setting string, sample []time.Duration) (latencySummary, error) {
	if len(sample) == 0 {
		return latencySummary{}, fmt.Errorf("%s: no latencies were measured", setting)
	}
	sorted := slices.Clone(sample)
	slices.Sort(sorted)
	return latencySummary{
		setting: setting,
		n:       len(sorted),
		p50:     percentile(sorted, 50),
		p99:     percentile(sorted, 99),
		max:     sorted[len(sorted)-1],
	}, nil
}

// percentile is the nearest-rank percentile p of a sorted, non-empty sample.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func mib(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }
