package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/rendezvous"
)

// targetScaling is what adding agents to one pool must keep: throughput with k agents ÷
// throughput with one.
const targetScaling = 1.0

// scalingResult is one throughput run of several agents on one PostgreSQL database.
type scalingResult struct {
	agents     int
	throughput throughputResult
	latency    latencySummary // each resource's insert-to-ready within the burst
}

// failoverResult is one failover run: agents draining a burst, one of them killed with
// SIGKILL mid-burst and never restarted.
type failoverResult struct {
	agents, n           int
	agentTTL, heartbeat time.Duration
	victim              string
	readyAtKill         int // burst resources ready when the agent was killed
	held                int // resources the killed agent held leases on or was to provision
	leftHeld            int // leases still naming the killed agent once all were ready

	// From the kill (the database clock, read just after the process was gone):
	firstTakenOver time.Duration // to the first of the killed agent's resources ready
	heldReady      time.Duration // to the last of them ready
	allReady       time.Duration // to the whole burst ready
	burst          time.Duration // the burst, from its insert to the last resource ready
}

// agentCounts parses -agents: a comma-separated list of positive agent counts, or "" for
// none.
func agentCounts(list string) ([]int, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	counts, err := positiveInts("-agents", list)
	if err != nil {
		return nil, fmt.Errorf("%w (or \"\" to skip the runs with several agents)", err)
	}
	return counts, nil
}

// scale measures Berth's throughput on PostgreSQL with each agent count of -agents, the
// counts in turn for each of -agents-rounds rounds (so that a machine's changing load falls
// on every count alike), then the failover run.
func scale(ctx context.Context, cfg config, rep *report) error {
	for range cfg.agentsRounds {
		for _, k := range cfg.agentCounts {
			f := fleet{agents: k, concurrency: cfg.agentConcurrency}
			res, lat, err := burst(ctx, cfg, storePostgres, f, cfg.agentsN)
			if err != nil {
				return fmt.Errorf("throughput with %s: %w", plural(k, "agent"), err)
			}
			summary, err := summarize(res.setting, lat)
			if err != nil {
				return err
			}
			rep.scaling = append(rep.scaling, scalingResult{agents: k, throughput: res, latency: summary})
		}
	}
	if !cfg.failover {
		return nil
	}
	res, err := failover(ctx, cfg)
	if err != nil {
		return fmt.Errorf("failover of %d agents: %w", cfg.failoverAgents, err)
	}
	rep.failover = &res
	return nil
}

// failover starts cfg.failoverAgents agents on one PostgreSQL database, inserts a burst of
// cfg.agentsN resources, kills the agent holding the most leases (the first agent when none
// holds any: runtimes provisioned in one transaction hold none) with SIGKILL once a third
// of the burst is ready, and times the rest from the kill: the killed agent's resources
// (those it held, and its share of those nobody held) ready again and the whole burst ready.
func failover(ctx context.Context, cfg config) (res failoverResult, err error) {
	res = failoverResult{agents: cfg.failoverAgents, n: cfg.agentsN, agentTTL: cfg.failoverTTL, heartbeat: cfg.failoverHeartbeat}
	f := fleet{agents: cfg.failoverAgents, concurrency: cfg.agentConcurrency, flags: []string{
		"--agent-ttl", cfg.failoverTTL.String(), "--heartbeat-interval", cfg.failoverHeartbeat.String(),
	}}
	r, err := startBerth(ctx, cfg, storePostgres, f, res.n)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	if err := r.insert(ctx, "bench", res.n); err != nil {
		return res, err
	}
	if err := r.waitReady(ctx, cfg, "bench", max(1, res.n/3)); err != nil {
		return res, err
	}
	leases, err := r.leasesByHolder(ctx)
	if err != nil {
		return res, err
	}
	res.victim = mostLeases(leases)
	if res.victim == "" {
		// Runtimes provisioned in one transaction hold no lease: the first agent is killed,
		// and what it was to provision is its rendezvous share of the burst not yet ready.
		res.victim = agentID(0)
	}
	victim := r.agentByID(res.victim)
	if victim == nil {
		return res, fmt.Errorf("leases are held by %s, which is no agent of this run", res.victim)
	}
	if err := victim.kill(); err != nil {
		return res, err
	}
	killedAt, err := r.noteKill(ctx, &res)
	if err != nil {
		return res, err
	}
	if res.held == 0 {
		return res, fmt.Errorf("%s held nothing and had nothing left to provision when it was killed (%d of %d ready): raise -agents-n", res.victim, res.readyAtKill, res.n)
	}
	if err := r.waitReady(ctx, cfg, "bench", res.n); err != nil {
		return res, err
	}
	if err := r.failoverTimes(ctx, killedAt, &res); err != nil {
		return res, err
	}
	slog.Info("berth failover", "agents", res.agents, "killed", res.victim, "held", res.held,
		"held-ready-after", res.heldReady.Round(time.Millisecond), "all-ready-after", res.allReady.Round(time.Millisecond))
	return res, nil
}

// noteKill reads the database clock just after res.victim was killed, counts the burst's
// ready resources and those the victim held or was to provision, and notes the latter in
// the table bench_held for failoverTimes: the resources it held a lease on (its leases hold
// until its heartbeat is --agent-ttl old, so no takeover has happened yet), and those not
// yet ready that nobody held whose rendezvous owner among the run's agents it was (each
// agent takes up its share of every change first; the others take up the rest once it has
// had its grace).
func (r *berthRun) noteKill(ctx context.Context, res *failoverResult) (time.Time, error) {
	var killedAt time.Time
	if err := r.sql.QueryRowContext(ctx, `
		SELECT clock_timestamp(), count(*) FILTER (WHERE status = 'ready')
		  FROM resources WHERE name LIKE 'bench-%'`).Scan(&killedAt, &res.readyAtKill); err != nil {
		return killedAt, fmt.Errorf("read the burst at the kill: %w", err)
	}
	rows, err := r.sql.QueryContext(ctx, `
		SELECT id::text, coalesce(lease_holder, '') FROM resources WHERE name LIKE 'bench-%' AND status <> 'ready'`)
	if err != nil {
		return killedAt, fmt.Errorf("read the burst at the kill: %w", err)
	}
	agents := make([]string, len(r.agents))
	for i, a := range r.agents {
		agents[i] = a.id
	}
	sort.Strings(agents)
	var held []string
	for rows.Next() {
		var id, holder string
		if err := rows.Scan(&id, &holder); err != nil {
			rows.Close()
			return killedAt, fmt.Errorf("read the burst at the kill: %w", err)
		}
		if holder == res.victim || (holder == "" && rendezvous.Owner(agents, id) == res.victim) {
			held = append(held, id)
		}
	}
	if err := rows.Err(); err != nil {
		return killedAt, fmt.Errorf("read the burst at the kill: %w", err)
	}
	res.held = len(held)
	list, err := json.Marshal(held)
	if err != nil {
		return killedAt, err
	}
	if _, err := r.sql.ExecContext(ctx, `
		CREATE TABLE bench_held AS SELECT value::uuid AS id FROM jsonb_array_elements_text($1::jsonb)`, string(list)); err != nil {
		return killedAt, fmt.Errorf("note the killed agent's resources: %w", err)
	}
	return killedAt, nil
}

// failoverTimes reads, once the burst is ready, how long after killedAt the resources noted
// by noteKill and the whole burst were ready, and counts the leases still naming the victim.
func (r *berthRun) failoverTimes(ctx context.Context, killedAt time.Time, res *failoverResult) error {
	var first, held, all, burst float64
	if err := r.sql.QueryRowContext(ctx, `
		SELECT extract(epoch FROM min(r.ready_at) FILTER (WHERE h.id IS NOT NULL) - $1::timestamptz)::float8,
		       extract(epoch FROM max(r.ready_at) FILTER (WHERE h.id IS NOT NULL) - $1::timestamptz)::float8,
		       extract(epoch FROM max(r.ready_at) - $1::timestamptz)::float8,
		       extract(epoch FROM max(r.ready_at) - min(r.created_at))::float8
		  FROM resources r LEFT JOIN bench_held h ON h.id = r.id
		 WHERE r.name LIKE 'bench-%'`, killedAt).Scan(&first, &held, &all, &burst); err != nil {
		return fmt.Errorf("read the failover times: %w", err)
	}
	res.firstTakenOver, res.heldReady, res.allReady, res.burst = seconds(first), seconds(held), seconds(all), seconds(burst)
	if err := r.sql.QueryRowContext(ctx, `SELECT count(*) FROM resources WHERE lease_holder = $1`, res.victim).Scan(&res.leftHeld); err != nil {
		return fmt.Errorf("count the killed agent's leases: %w", err)
	}
	return nil
}

// leasesByHolder counts the leases on resources not yet ready, by holder.
func (r *berthRun) leasesByHolder(ctx context.Context) (map[string]int, error) {
	rows, err := r.sql.QueryContext(ctx, `
		SELECT lease_holder, count(*) FROM resources
		 WHERE lease_holder IS NOT NULL AND status <> 'ready' GROUP BY lease_holder`)
	if err != nil {
		return nil, fmt.Errorf("count leases: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var holder string
		var n int
		if err := rows.Scan(&holder, &n); err != nil {
			return nil, fmt.Errorf("count leases: %w", err)
		}
		out[holder] = n
	}
	return out, rows.Err()
}

// agentByID is the run's agent of --agent-id id, or nil.
func (r *berthRun) agentByID(id string) *agent {
	for _, a := range r.agents {
		if a.id == id {
			return a
		}
	}
	return nil
}

// mostLeases is the holder with the most leases, the first by name among equals; "" when
// nobody holds one.
func mostLeases(leases map[string]int) string {
	holders := make([]string, 0, len(leases))
	for h, n := range leases {
		if n > 0 {
			holders = append(holders, h)
		}
	}
	sort.Strings(holders)
	best := ""
	for _, h := range holders {
		if best == "" || leases[h] > leases[best] {
			best = h
		}
	}
	return best
}

// fastestByAgents is the fastest run of each agent count, in the order the counts first
// appear.
func fastestByAgents(runs []scalingResult) []scalingResult {
	var out []scalingResult
	index := map[int]int{}
	for _, r := range runs {
		i, ok := index[r.agents]
		switch {
		case !ok:
			index[r.agents] = len(out)
			out = append(out, r)
		case r.throughput.perSecond() > out[i].throughput.perSecond():
			out[i] = r
		}
	}
	return out
}

// scalingRatios is each run's throughput over the one-agent run's, for the runs of more
// than one agent; nil without a one-agent run. runs has one run per count.
func scalingRatios(runs []scalingResult) map[int]float64 {
	var base *scalingResult
	for i := range runs {
		if runs[i].agents == 1 {
			base = &runs[i]
		}
	}
	if base == nil {
		return nil
	}
	out := map[int]float64{}
	for _, r := range runs {
		if r.agents > 1 {
			out[r.agents] = r.throughput.perSecond() / base.throughput.perSecond()
		}
	}
	return out
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
