package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/store"
)

// Stores Berth is measured on.
const (
	storePostgres = "postgres"
	storeSQLite   = "sqlite"
)

// berthRun is one Berth measurement: a fresh database (a PostgreSQL database on the bench
// server, or an SQLite file in a temporary directory), its schema, and its agents.
type berthRun struct {
	kind   string
	url    string
	dbName string // the PostgreSQL database's name; "" on SQLite
	drop   func() // removes the database
	sql    *sql.DB
	state  store.DB
	agents []*agent
	poll   time.Duration         // how often waitReady counts; 0: defaultPoll
	polled func(ready int) error // when set, called by waitReady with each count it reads
}

// fleet is the agents of one run: how many, each one's --concurrency, and further flags of
// berth run they all get; the binary and provisioner set they run when not the bench's own
// (cfg.binary, a static pool with room for the run).
type fleet struct {
	agents      int
	concurrency int
	// adaptive leaves the agents' limit on reconciles in flight to adapt up to concurrency
	// (the agent's default); otherwise it is fixed at concurrency, so that a run measures
	// the setting it names.
	adaptive bool
	flags    []string
	binary   string // "": cfg.binary
	set      string // provisioner set JSON naming provisionerName; "": the static pool
}

// limitFlags are the flags of berth run (of binary) that fix the fleet's agents' limit on
// reconciles in flight at its concurrency, or none when the limit adapts.
func limitFlags(f fleet, binary string) []string {
	if f.adaptive || !hasRunFlag(binary, "--min-concurrency") {
		// A build from before the limit adapted has a fixed one, and no such flag.
		return nil
	}
	return []string{"--min-concurrency", strconv.Itoa(f.concurrency)}
}

// setting names the fleet's agents' setting, as the reports show it.
func (f fleet) setting() string {
	switch {
	case f.agents > 1:
		return fmt.Sprintf("%d agents, concurrency=%d each", f.agents, f.concurrency)
	case f.adaptive:
		return fmt.Sprintf("default (16 to %d)", f.concurrency)
	}
	return fmt.Sprintf("concurrency=%d", f.concurrency)
}

// oneAgent is the fleet of the single-agent runs.
func oneAgent(concurrency int) fleet { return fleet{agents: 1, concurrency: concurrency} }

// startBerth prepares a database of kind and starts the fleet's agents on it with room for
// slots resources, then waits for a warm-up resource so agent start-up is not part of what
// is measured. The caller must close the run.
func startBerth(ctx context.Context, cfg config, kind string, f fleet, slots int) (*berthRun, error) {
	r := &berthRun{kind: kind}
	if err := r.create(ctx, cfg); err != nil {
		return nil, err
	}
	if err := r.start(ctx, cfg, f, slots); err != nil {
		return nil, errors.Join(err, r.close())
	}
	return r, nil
}

// create makes the empty database.
func (r *berthRun) create(ctx context.Context, cfg config) error {
	if r.kind == storePostgres {
		db, err := createDatabase(ctx, cfg.server)
		if err != nil {
			return err
		}
		r.url, r.dbName, r.drop = db.url, db.name, db.drop
		return nil
	}
	dir, err := os.MkdirTemp("", "berth-bench-")
	if err != nil {
		return fmt.Errorf("create a directory for the SQLite file: %w", err)
	}
	r.url = "sqlite://" + (&url.URL{Path: filepath.Join(dir, "berth.db")}).EscapedPath()
	r.drop = func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "bench: could not remove %s (remove it by hand): %v\n", dir, err)
		}
	}
	return nil
}

func (r *berthRun) start(ctx context.Context, cfg config, f fleet, slots int) error {
	if err := migrate(ctx, cfg.binary, r.url); err != nil {
		return err
	}
	var err error
	if r.sql, err = openSQL(r.kind, r.url); err != nil {
		return err
	}
	if r.state, err = store.Open(ctx, r.url, store.Options{MaxConns: 2}); err != nil {
		return fmt.Errorf("open the bench database: %w", err)
	}
	binary, set := f.binary, f.set
	if binary == "" {
		binary = cfg.binary
	}
	if set == "" {
		if set, err = provisionerSet(slots + 1); err != nil {
			return err
		}
	}
	flags := append(limitFlags(f, binary), f.flags...)
	for i := range f.agents {
		a, err := startAgent(binary, r.url, agentID(i), set, f.concurrency, flags...)
		if err != nil {
			return err
		}
		r.agents = append(r.agents, a)
	}
	if err := r.insert(ctx, "warmup", 1); err != nil {
		return err
	}
	return r.waitReady(ctx, cfg, "warmup", 1)
}

// openSQL opens a database/sql pool on the database, through which the bench writes as
// another program (the CLI, a script) would.
func openSQL(kind, dbURL string) (*sql.DB, error) {
	driver, dsn := "pgx", dbURL
	if kind == storeSQLite {
		loc, err := store.Parse(dbURL)
		if err != nil {
			return nil, err
		}
		driver = "sqlite"
		dsn = "file:" + (&url.URL{Path: loc.Path}).EscapedPath() + "?_pragma=busy_timeout(10000)&_txlock=immediate"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open the bench database: %w", err)
	}
	db.SetMaxOpenConns(2)
	return db, nil
}

// agentID is the --agent-id of a run's agent i (from 0).
func agentID(i int) string { return fmt.Sprintf("bench-%d", i+1) }

// close stops the agents, then removes the database.
func (r *berthRun) close() error {
	var err error
	for _, a := range r.agents {
		err = errors.Join(err, a.stop())
	}
	if r.state != nil {
		r.state.Close()
	}
	if r.sql != nil {
		_ = r.sql.Close()
	}
	r.drop()
	return err
}

// insert adds n runtime resources named prefix-0 … prefix-(n-1) in one statement.
func (r *berthRun) insert(ctx context.Context, prefix string, n int) error {
	if _, err := r.sql.ExecContext(ctx, insertSQL(r.kind), prefix, n); err != nil {
		return fmt.Errorf("insert %d resources: %w", n, err)
	}
	return nil
}

// insertSQL inserts $2 runtimes named $1-i, i from 0, of 50 owners in turn, in one statement
// on the store kind.
func insertSQL(kind string) string {
	rows := `SELECT i FROM generate_series(0, $2 - 1) AS i`
	if kind == storeSQLite {
		rows = `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < $2 - 1) SELECT i FROM s`
	}
	return `
		INSERT INTO resources (type, name, owner, args)
		SELECT 'runtime', $1 || '-' || i, 'owner-' || (i % 50), '{"slots":1}' FROM (` + rows + `) AS n`
}

// insertTimed inserts n resources named prefix-i as insert does, in a transaction, and
// returns the database clock read in it just before its COMMIT: no agent can see a row
// earlier, so a drain timed from it counts the commit and none of the insert before it. On
// SQLite the clock is the host's, to the millisecond, as the store's timestamps are.
func (r *berthRun) insertTimed(ctx context.Context, prefix string, n int) (time.Time, error) {
	var committing time.Time
	tx, err := r.sql.BeginTx(ctx, nil)
	if err != nil {
		return committing, fmt.Errorf("begin the insert of %d resources: %w", n, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, insertSQL(r.kind), prefix, n); err != nil {
		return committing, fmt.Errorf("insert %d resources: %w", n, err)
	}
	if r.kind == storeSQLite {
		var now string
		err = tx.QueryRowContext(ctx, `SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`).Scan(&now)
		if err == nil {
			committing, err = time.Parse(time.RFC3339Nano, now)
		}
	} else {
		err = tx.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&committing)
	}
	if err != nil {
		return committing, fmt.Errorf("read the database clock before the insert's commit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return committing, fmt.Errorf("commit the insert of %d resources: %w", n, err)
	}
	return committing, nil
}

// defaultPoll is how often waitReady counts the ready resources. The count reads the whole
// table, database time taken from the agent under test (River's and the peer's runs wait on
// completion events instead), and counting more often would not change a figure: the times
// are the database's timestamps of each resource, not when the bench saw the count.
const defaultPoll = 250 * time.Millisecond

// waitReady polls until n resources named prefix-* are ready, the agent dies, or the wait
// times out; on a timeout it reports the status counts.
func (r *berthRun) waitReady(ctx context.Context, cfg config, prefix string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.waitTimeout)
	defer cancel()
	poll := r.poll
	if poll == 0 {
		poll = defaultPoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		var ready int
		err := r.sql.QueryRowContext(ctx, `
			SELECT count(*) FROM resources WHERE status = 'ready' AND name LIKE $1`,
			prefix+"-%").Scan(&ready)
		switch {
		case err == nil && ready >= n:
			return nil
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("count ready resources: %w", err)
		}
		if err := r.alive(); err != nil {
			return err
		}
		if r.polled != nil && err == nil {
			if err := r.polled(ready); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ctx.Err()
			}
			return fmt.Errorf("%d of %d %s resources ready after %s; statuses: %s; %s",
				ready, n, prefix, cfg.waitTimeout, r.statusCounts(), r.agentLogs())
		case <-tick.C:
		}
	}
}

// alive returns an error when an agent of the run has exited, unless it was killed on purpose.
func (r *berthRun) alive() error {
	for _, a := range r.agents {
		if err := a.alive(); err != nil {
			return err
		}
	}
	return nil
}

// agentLogs is the last output of each agent, for a failure report.
func (r *berthRun) agentLogs() string {
	var b strings.Builder
	for _, a := range r.agents {
		fmt.Fprintf(&b, "output of agent %s:\n%s\n", a.id, a.log)
	}
	return b.String()
}

// peakRSS is the largest peak RSS of the run's agents that are still running.
func (r *berthRun) peakRSS() (int64, error) {
	var peak int64
	for _, a := range r.agents {
		if a.killed {
			continue
		}
		rss, err := a.peakRSS()
		if err != nil {
			return 0, err
		}
		peak = max(peak, rss)
	}
	return peak, nil
}

// cpuTime is the CPU time the run's agents that are still running have used so far.
func (r *berthRun) cpuTime() (time.Duration, error) {
	var total time.Duration
	for _, a := range r.agents {
		if a.killed {
			continue
		}
		cpu, err := a.cpuTime()
		if err != nil {
			return 0, err
		}
		total += cpu
	}
	return total, nil
}

// statusCounts summarises the resources table for a failure report.
func (r *berthRun) statusCounts() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	counts, err := r.state.CountResourcesByStatus(ctx)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var parts []string
	for _, s := range domain.Statuses {
		if n, ok := counts[s]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", s, n))
		}
	}
	return strings.Join(parts, " ")
}

// ready returns the ready resources named prefix-*, read through the store's API.
func (r *berthRun) ready(ctx context.Context, prefix string) ([]domain.Resource, error) {
	all, err := r.state.ListResources(ctx, domain.ListFilter{Status: domain.StatusReady})
	if err != nil {
		return nil, fmt.Errorf("read the ready resources: %w", err)
	}
	var out []domain.Resource
	for _, res := range all {
		if strings.HasPrefix(res.Name, prefix+"-") && res.ReadyAt != nil {
			out = append(out, res)
		}
	}
	return out, nil
}

// throughputResult is one Berth or River throughput run.
type throughputResult struct {
	setting  string        // e.g. "concurrency=16"
	parallel int           // the agent's concurrency or River's MaxWorkers
	n        int           // resources or jobs
	elapsed  time.Duration // time to make all of them ready or completed once inserted
	// insert is how long the client's insert of them took, before elapsed; 0 when not
	// measured.
	insert  time.Duration
	peakRSS int64 // agent's VmHWM in bytes; 0 when not measured
	// agentCPU is the CPU time the agents used from the insert until all were ready; 0 when
	// not measured. Per resource, it is a steadier figure than the rate on a busy machine.
	agentCPU time.Duration
	// statements is where the database time went, for a run of one agent on PostgreSQL.
	statements *statementProfile
	// adaptive says the run left the agent's limit on reconciles in flight to adapt up to
	// parallel (the agent's default settings).
	adaptive bool
	// rounds is the rate of each round's run of the setting, in order, this run the fastest
	// (keepFastest); empty for a setting run once outside the rounds.
	rounds []float64
}

func (t throughputResult) perSecond() float64 { return float64(t.n) / t.elapsed.Seconds() }

// agentFleet is one agent at the run's setting, for the latency runs at it.
func (t throughputResult) agentFleet() fleet {
	return fleet{agents: 1, concurrency: t.parallel, adaptive: t.adaptive}
}

// perSecondWithInsert is the rate counting the client's insert in the run's time.
func (t throughputResult) perSecondWithInsert() float64 {
	return float64(t.n) / (t.insert + t.elapsed).Seconds()
}

// cpuPerResource is the agents' CPU time per resource, e.g. "118 us/resource".
func (t throughputResult) cpuPerResource() string {
	if t.n == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%d us/resource", (t.agentCPU / time.Duration(t.n)).Microseconds())
}

// berthThroughput inserts n resources at once and times them to ready with one agent of
// the given concurrency.
func berthThroughput(ctx context.Context, cfg config, kind string, n, concurrency int) (throughputResult, error) {
	res, _, err := burst(ctx, cfg, kind, oneAgent(concurrency), n)
	return res, err
}

// burst inserts n resources at once on a database with the fleet's agents and times their
// drain: from the database clock read in the insert's transaction just before its COMMIT (no
// agent can see a row before that) to the last ready_at, as River's drain is timed from the
// client's start after its jobs were inserted. The insert's own time (that clock reading -
// min(created_at)) is kept apart: a client's cost, not the agents'. It returns each
// resource's ready_at - created_at too.
func burst(ctx context.Context, cfg config, kind string, f fleet, n int) (res throughputResult, lat []time.Duration, err error) {
	r, err := startBerth(ctx, cfg, kind, f, n)
	if err != nil {
		return res, nil, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	cpu0, err := r.cpuTime()
	if err != nil {
		return res, nil, err
	}
	committing, err := r.insertTimed(ctx, "bench", n)
	if err != nil {
		return res, nil, err
	}
	if err := r.waitReady(ctx, cfg, "bench", n); err != nil {
		return res, nil, err
	}
	if res.peakRSS, err = r.peakRSS(); err != nil {
		return res, nil, err
	}
	cpu1, err := r.cpuTime()
	if err != nil {
		return res, nil, err
	}
	res.agentCPU = cpu1 - cpu0
	ready, err := r.ready(ctx, "bench")
	if err != nil {
		return res, nil, err
	}
	firstCreated, lastReady, lat := readyTimes(ready)
	res.elapsed, res.insert = lastReady.Sub(committing), committing.Sub(firstCreated)
	res.n = len(ready)
	if kind == storePostgres && f.agents == 1 && f.set == "" {
		p := readStatementProfile(ctx, cfg.server, r.dbName, "resource", res.n)
		res.statements = &p
	}
	res.setting, res.parallel, res.adaptive = f.setting(), f.concurrency, f.adaptive
	slog.Info("berth throughput", "store", kind, "agents", f.agents, "concurrency", f.concurrency, "resources", res.n, "elapsed", res.elapsed.Round(time.Millisecond))
	return res, lat, nil
}

// readySpan is the time from the first resource's creation to the last one's readiness, and
// each one's ready_at - created_at; every resource of ready (not empty) has its ReadyAt.
func readySpan(ready []domain.Resource) (time.Duration, []time.Duration) {
	first, last, lat := readyTimes(ready)
	return last.Sub(first), lat
}

// readyTimes returns the first resource's creation, the last one's readiness and each one's
// ready_at - created_at; every resource of ready (not empty) has its ReadyAt.
func readyTimes(ready []domain.Resource) (firstCreated, lastReady time.Time, lat []time.Duration) {
	firstCreated, lastReady = ready[0].CreatedAt, *ready[0].ReadyAt
	lat = make([]time.Duration, 0, len(ready))
	for _, x := range ready {
		if x.CreatedAt.Before(firstCreated) {
			firstCreated = x.CreatedAt
		}
		if x.ReadyAt.After(lastReady) {
			lastReady = *x.ReadyAt
		}
		lat = append(lat, x.ReadyAt.Sub(x.CreatedAt))
	}
	return firstCreated, lastReady, lat
}

// latencyRun is what a latency run measured of each resource: ready_at - created_at and, on
// SQLite, where the database clock is the host's, the inserting client's own part (from
// created_at to its insert's return: the insert's triggers and its durable commit) and the
// agent's (from that return to ready_at). Both parts are nil on PostgreSQL, whose clock is
// the server's.
type latencyRun struct {
	ready, insert, agent []time.Duration
}

// berthLatency inserts cfg.latencyN resources one at a time at cfg.rate with the fleet's
// agent and returns each one's latencies (latencyRun).
func berthLatency(ctx context.Context, cfg config, kind string, f fleet) (run latencyRun, err error) {
	r, err := startBerth(ctx, cfg, kind, f, cfg.latencyN)
	if err != nil {
		return run, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	returned := make(map[string]time.Time, cfg.latencyN)
	err = paced(ctx, cfg.latencyN, cfg.rate, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("latency-%d", i)
		_, err := r.sql.ExecContext(ctx, `
			INSERT INTO resources (type, name, owner, args) VALUES ('runtime', $1, $2, '{"slots":1}')`,
			name, fmt.Sprintf("owner-%d", i%50))
		returned[name] = time.Now()
		return err
	})
	if err != nil {
		return run, fmt.Errorf("insert latency resources: %w", err)
	}
	if err := r.waitReady(ctx, cfg, "latency", cfg.latencyN); err != nil {
		return run, err
	}
	ready, err := r.ready(ctx, "latency")
	if err != nil {
		return run, err
	}
	for _, x := range ready {
		run.ready = append(run.ready, x.ReadyAt.Sub(x.CreatedAt))
		if kind == storeSQLite {
			run.insert = append(run.insert, returned[x.Name].Sub(x.CreatedAt))
			run.agent = append(run.agent, x.ReadyAt.Sub(returned[x.Name]))
		}
	}
	return run, nil
}
