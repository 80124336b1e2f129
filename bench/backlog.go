package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets of the scale run: what one agent may cost with a large burst or backlog.
const (
	targetScaleRSS        = 256 << 20       // the agent's peak RSS draining -scale-n runtimes inserted at once
	targetFirstReconcile  = 2 * time.Second // a restarted agent's process start to its first reconcile
	targetRestartRSSRatio = 1.1             // restarted agent's peak RSS ÷ the burst agent's: memory stays flat
)

// scalePoll is how often the scale run counts ready resources: a count of a table of
// 2 × -scale-n rows costs the database real time, which a 100 ms poll would take from the
// agent on a small machine.
const scalePoll = time.Second

// Name prefixes of the scale run's resources.
const (
	scaleBurstPrefix   = "scale"
	scaleBacklogPrefix = "backlog"
)

// backlogResult is the scale run: one agent drains -scale-n runtimes inserted at once, is
// stopped, and a new agent process starts on -scale-n more inserted while none ran.
type backlogResult struct {
	n     int
	agent fleet // the agent's setting, the burst's and the restart's

	burst        time.Duration // the burst, from its insert to its last resource ready
	burstRSS     int64         // the burst agent's VmHWM once the burst was ready
	burstSamples []rssSample   // the burst agent's VmRSS as the burst drained

	// From the restarted agent's process start, on the database clock:
	firstChange time.Duration // to the backlog's first status change, its first reconcile
	firstReady  time.Duration // to the backlog's first resource ready
	drained     time.Duration // to the backlog's last resource ready
	restartRSS  int64         // the restarted agent's VmHWM once the backlog was ready

	restartSamples []rssSample // the restarted agent's VmRSS as the backlog drained
}

// rssSample is an agent's RSS and peak RSS so far when ready resources of its drain were
// ready.
type rssSample struct {
	ready int
	rss   int64 // VmRSS
	hwm   int64 // VmHWM
}

// peakReached is the ready count of the first sample by which the agent's peak RSS had
// reached peak, and false when none had.
func peakReached(samples []rssSample, peak int64) (int, bool) {
	for _, s := range samples {
		if s.hwm >= peak {
			return s.ready, true
		}
	}
	return 0, false
}

// rssQuarters is the RSS of the first sample at or past each quarter of n ready: 0%, 25%,
// 50%, 75% and 100%; a quarter no sample reached is 0. samples are in the order taken.
func rssQuarters(samples []rssSample, n int) [5]int64 {
	var out [5]int64
	for q := range out {
		for _, s := range samples {
			if 4*s.ready >= q*n {
				out[q] = s.rss
				break
			}
		}
	}
	return out
}

// sampleRSS returns a waitReady hook that appends agent a's RSS, its peak RSS so far and
// the ready count to into.
func sampleRSS(a *agent, into *[]rssSample) func(ready int) error {
	return func(ready int) error {
		rss, err := a.rss()
		if err != nil {
			return err
		}
		hwm, err := a.peakRSS()
		if err != nil {
			return err
		}
		*into = append(*into, rssSample{ready: ready, rss: rss, hwm: hwm})
		return nil
	}
}

// drainRSS waits for n resources named prefix-* to be ready, sampling the run's one agent's
// RSS at each count and once more when all are ready, and returns the samples and its peak
// RSS then.
func (r *berthRun) drainRSS(ctx context.Context, cfg config, prefix string, n int) (samples []rssSample, peak int64, err error) {
	a := r.agents[0]
	r.polled = sampleRSS(a, &samples)
	defer func() { r.polled = nil }()
	if err := r.waitReady(ctx, cfg, prefix, n); err != nil {
		return nil, 0, err
	}
	if err := sampleRSS(a, &samples)(n); err != nil {
		return nil, 0, err
	}
	return samples, samples[len(samples)-1].hwm, nil
}

func (b backlogResult) burstPerSecond() float64 { return float64(b.n) / b.burst.Seconds() }

func (b backlogResult) drainPerSecond() float64 { return float64(b.n) / b.drained.Seconds() }

func (b backlogResult) burstRSSMet() bool { return b.burstRSS <= targetScaleRSS }

func (b backlogResult) firstReconcileMet() bool { return b.firstChange <= targetFirstReconcile }

// rssRatio is the restarted agent's peak RSS over the burst agent's.
func (b backlogResult) rssRatio() float64 { return float64(b.restartRSS) / float64(b.burstRSS) }

func (b backlogResult) flatRSSMet() bool { return b.rssRatio() <= targetRestartRSSRatio }

// scaleAgent is the scale run's agent: at -scale-concurrency, fixed, when set, else at the
// setting of the fastest PostgreSQL throughput run (the agent's default settings when that
// run was at them), else at the largest of -berth-concurrency, fixed.
func scaleAgent(cfg config, rep *report) fleet {
	if cfg.scaleConcurrency > 0 {
		return oneAgent(cfg.scaleConcurrency)
	}
	if pg := rep.berthResults(storePostgres); pg != nil && len(pg.throughput) > 0 {
		return fastest(pg.throughput).agentFleet()
	}
	return oneAgent(slices.Max(cfg.berthConcurrency))
}

// backlog runs the scale measurement on a fresh PostgreSQL database: one agent drains a
// burst of cfg.scaleN runtimes inserted in one statement; it is stopped with SIGTERM, as an
// upgrade stops it, and cfg.scaleN more are inserted while no agent runs; then a new agent
// process (the same --agent-id and flags) starts on that backlog, and the bench times its
// first reconcile and the drain from the process start.
func backlog(ctx context.Context, cfg config, f fleet) (res backlogResult, err error) {
	res = backlogResult{n: cfg.scaleN, agent: f}
	slots := 2 * cfg.scaleN // the burst and the backlog stay placed side by side
	r, err := startBerth(ctx, cfg, storePostgres, f, slots)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	r.poll = scalePoll
	if err := r.insert(ctx, scaleBurstPrefix, res.n); err != nil {
		return res, err
	}
	if res.burstSamples, res.burstRSS, err = r.drainRSS(ctx, cfg, scaleBurstPrefix, res.n); err != nil {
		return res, err
	}
	if res.burst, err = r.burstSpan(ctx, scaleBurstPrefix); err != nil {
		return res, err
	}
	slog.Info("berth scale burst", "resources", res.n, "setting", f.setting(), "elapsed", res.burst.Round(time.Millisecond), "peak-rss", mib(res.burstRSS))

	stopped := r.agents[0]
	r.agents = nil // stopped here; close must not stop it again
	if err := stopped.stop(); err != nil {
		return res, err
	}
	if err := r.insert(ctx, scaleBacklogPrefix, res.n); err != nil {
		return res, err
	}
	startedAt, err := r.clock(ctx)
	if err != nil {
		return res, err
	}
	set, err := provisionerSet(slots + 1)
	if err != nil {
		return res, err
	}
	a, err := startAgent(cfg.binary, r.url, stopped.id, set, f.concurrency, limitFlags(f, cfg.binary)...)
	if err != nil {
		return res, err
	}
	r.agents = []*agent{a}
	if res.restartSamples, res.restartRSS, err = r.drainRSS(ctx, cfg, scaleBacklogPrefix, res.n); err != nil {
		return res, err
	}
	if err := r.backlogTimes(ctx, scaleBacklogPrefix, startedAt, &res); err != nil {
		return res, err
	}
	slog.Info("berth scale restart", "resources", res.n, "first-reconcile", res.firstChange.Round(time.Millisecond),
		"drained", res.drained.Round(time.Millisecond), "peak-rss", mib(res.restartRSS))
	return res, nil
}

// clock reads the database clock.
func (r *berthRun) clock(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := r.sql.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return now, fmt.Errorf("read the database clock: %w", err)
	}
	return now, nil
}

// burstSpan is max(ready_at) - min(created_at) of the resources named prefix-*, read in SQL
// (a list of 100,000 resources through the store's API would cost the bench more than the
// figure is worth).
func (r *berthRun) burstSpan(ctx context.Context, prefix string) (time.Duration, error) {
	var span float64
	if err := r.sql.QueryRowContext(ctx, `
		SELECT extract(epoch FROM max(ready_at) - min(created_at))::float8
		  FROM resources WHERE name LIKE $1 AND ready_at IS NOT NULL`, prefix+"-%").Scan(&span); err != nil {
		return 0, fmt.Errorf("read the %s burst's span: %w", prefix, err)
	}
	return seconds(span), nil
}

// backlogTimes reads, once the resources named prefix-* are ready, how long after startedAt
// the first of them changed status (the first status event the agent recorded for one of
// them: its first reconcile), the first was ready and the last was ready.
func (r *berthRun) backlogTimes(ctx context.Context, prefix string, startedAt time.Time, res *backlogResult) error {
	var change, first, last *float64
	if err := r.sql.QueryRowContext(ctx, `
		SELECT (SELECT extract(epoch FROM min(e.at) - $2::timestamptz)::float8
		          FROM resource_events e JOIN resources x ON x.id = e.resource_id
		         WHERE x.name LIKE $1 AND e.kind = 'status' AND e.at >= $2::timestamptz),
		       extract(epoch FROM min(ready_at) - $2::timestamptz)::float8,
		       extract(epoch FROM max(ready_at) - $2::timestamptz)::float8
		  FROM resources WHERE name LIKE $1`, prefix+"-%", startedAt).Scan(&change, &first, &last); err != nil {
		return fmt.Errorf("read the backlog's times: %w", err)
	}
	if change == nil || first == nil || last == nil {
		return errors.New("the backlog has no status change or no ready resource after the agent's start")
	}
	res.firstChange, res.firstReady, res.drained = seconds(*change), seconds(*first), seconds(*last)
	return nil
}

// printBacklog writes the scale run's figures and targets.
func printBacklog(w io.Writer, b backlogResult) {
	fmt.Fprintf(w, "\nScale on PostgreSQL, one agent at %s: a burst of %d runtimes inserted at once; then the agent\n", b.agent.setting(), b.n)
	fmt.Fprintf(w, "is stopped (SIGTERM), %d more are inserted while none runs, and a new agent process starts on that backlog\n\n", b.n)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEASUREMENT\tRESULT")
	fmt.Fprintf(tw, "burst, insert -> all ready\t%.3f s, %.1f resources/s\n", b.burst.Seconds(), b.burstPerSecond())
	fmt.Fprintf(tw, "burst, agent peak RSS\t%s%s\n", mib(b.burstRSS), reachedBy(b.burstSamples, b.burstRSS, b.n))
	fmt.Fprintf(tw, "burst, agent RSS at 0/25/50/75/100%% ready\t%s\n", quarters(b.burstSamples, b.n))
	fmt.Fprintf(tw, "restart, process start -> first reconcile\t%.3f s (first ready at %.3f s)\n", b.firstChange.Seconds(), b.firstReady.Seconds())
	fmt.Fprintf(tw, "restart, process start -> backlog ready\t%.3f s, %.1f resources/s\n", b.drained.Seconds(), b.drainPerSecond())
	fmt.Fprintf(tw, "restart, agent peak RSS\t%s%s\n", mib(b.restartRSS), reachedBy(b.restartSamples, b.restartRSS, b.n))
	fmt.Fprintf(tw, "restart, agent RSS at 0/25/50/75/100%% ready\t%s\n", quarters(b.restartSamples, b.n))
	tw.Flush()
	fmt.Fprintf(w, "\nTimes are on the database clock; the restart's start is the clock read just before the process is started,\n")
	fmt.Fprintf(w, "its first reconcile the first status event recorded for a backlog resource. Peak RSS is VmHWM, read once all were ready;\n")
	fmt.Fprintf(w, "RSS as it drains is VmRSS, sampled at each count of ready resources (once a second).\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET (scale on PostgreSQL)\tRESULT\t")
	fmt.Fprintf(tw, "burst: peak RSS <= %s\t%s\t%s\n", mib(targetScaleRSS), mib(b.burstRSS), verdict(b.burstRSSMet()))
	fmt.Fprintf(tw, "restart: first reconcile within %s of start\t%.3f s\t%s\n",
		targetFirstReconcile, b.firstChange.Seconds(), verdict(b.firstReconcileMet()))
	fmt.Fprintf(tw, "restart: RSS stays flat (peak <= %.2f x the burst's)\t%s vs %s (%.2f x)\t%s\n",
		targetRestartRSSRatio, mib(b.restartRSS), mib(b.burstRSS), b.rssRatio(), verdict(b.flatRSSMet()))
	tw.Flush()
}

// quarters is rssQuarters of the samples for people, e.g. "40 / 52 / 60 / 61 / 61 MiB".
func quarters(samples []rssSample, n int) string {
	if len(samples) == 0 {
		return "not sampled"
	}
	q := rssQuarters(samples, n)
	parts := make([]string, len(q))
	for i, rss := range q {
		parts[i] = fmt.Sprintf("%.0f", float64(rss)/(1<<20))
	}
	return strings.Join(parts, " / ") + " MiB"
}

// reachedBy says by how much of a drain of n the peak was reached, e.g. " (reached by 12%
// ready)"; "" when the samples do not say.
func reachedBy(samples []rssSample, peak int64, n int) string {
	ready, ok := peakReached(samples, peak)
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (reached by %d%% ready)", 100*ready/n)
}
