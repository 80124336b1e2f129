package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// targetSleepScaling is what three agents must add on a broker whose work is waiting:
// throughput with three agents ÷ throughput with one.
const targetSleepScaling = 1.2

// sleepTargetAgents is the agent count the target compares with one agent.
const sleepTargetAgents = 3

// sleepRuns measures the agents of each count of -sleep-agents on the sleep broker, a
// provisioner whose every reconcile waits -sleep-delay (environ/sleep, in the agent built
// with the tag benchbroker): the database is not the limit there, so agents must add
// speed. The counts run in turn for each of -agents-rounds rounds.
func sleepRuns(ctx context.Context, cfg config, rep *report) error {
	set, err := sleepSet(cfg.sleepDelay)
	if err != nil {
		return err
	}
	for range cfg.agentsRounds {
		for _, k := range cfg.sleepAgents {
			f := fleet{agents: k, concurrency: cfg.sleepConcurrency, adaptive: true, binary: cfg.sleepBinary, set: set}
			res, lat, err := burst(ctx, cfg, storePostgres, f, cfg.sleepN)
			if err != nil {
				return fmt.Errorf("sleep broker with %s: %w", plural(k, "agent"), err)
			}
			summary, err := summarize(res.setting, lat)
			if err != nil {
				return err
			}
			rep.sleep = append(rep.sleep, scalingResult{agents: k, throughput: res, latency: summary})
		}
	}
	return nil
}

// sleepSet is the provisioner set of the sleep runs: one sleep broker of the delay.
func sleepSet(delay time.Duration) (string, error) {
	out, err := json.Marshal(map[string]any{provisionerName: map[string]any{
		"type": "sleep",
		"spec": map[string]any{"delay": delay.String()},
	}})
	return string(out), err
}

// printSleep writes the sleep broker's runs side by side and the target of three agents
// against one.
func (r *report) printSleep(w io.Writer) {
	if len(r.sleep) == 0 {
		return
	}
	fmt.Fprintf(w, "\nBerth (sleep broker: each reconcile waits %s) with several agents on one PostgreSQL database: a burst of %d resources each",
		r.cfg.sleepDelay, r.cfg.sleepN)
	if r.cfg.agentsRounds > 1 {
		fmt.Fprintf(w, ", the fastest of %d rounds", r.cfg.agentsRounds)
	}
	fmt.Fprintf(w, "\n\n")
	best := fastestByAgents(r.sleep)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENTS\tSETTING\tTHROUGHPUT\tINSERT->READY\tPEAK RSS")
	for _, s := range best {
		fmt.Fprintf(tw, "%d\tconcurrency=%d each\t%.1f resources/s (%d in %.3f s)\tp50 %s, p99 %s, max %s\t%s per agent at most\n",
			s.agents, s.throughput.parallel, s.throughput.perSecond(), s.throughput.n, s.throughput.elapsed.Seconds(),
			ms(s.latency.p50), ms(s.latency.p99), ms(s.latency.max), mib(s.throughput.peakRSS))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nOne agent can do at most concurrency / delay = %.0f resources/s here, so the database is not its limit.\n\n",
		float64(r.cfg.sleepConcurrency)/r.cfg.sleepDelay.Seconds())
	ratio, ok := scalingRatios(best)[sleepTargetAgents]
	if !ok {
		return
	}
	var one, three float64
	for _, s := range best {
		switch s.agents {
		case 1:
			one = s.throughput.perSecond()
		case sleepTargetAgents:
			three = s.throughput.perSecond()
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET (several agents, sleep broker)\tRESULT\t")
	fmt.Fprintf(tw, "throughput with %d agents / with 1 >= %.2f\t%.2f (%.1f resources/s / %.1f resources/s)\t%s\n",
		sleepTargetAgents, targetSleepScaling, ratio, three, one, verdict(ratio >= targetSleepScaling))
	tw.Flush()
}
