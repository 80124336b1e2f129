package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/worker/provisioner"
)

// defaultSleepConcurrency is the sleep broker's agents' --concurrency: 512 reconciles a second
// an agent at the default -sleep-delay, below the about 1,000 a second the database takes of a
// broker's usual claim, lease and records on 2 cores, so that what the runs measure is whether
// agents add speed where the database is not the limit. The agent's default ceiling (1,024)
// would let one agent reach the database's limit alone.
const defaultSleepConcurrency = 256

// Targets Berth is held to.
const (
	targetRatio     = 0.35 // Berth resources/s at the agent's default settings ÷ River jobs/s at its best
	targetRillRatio = 1.0  // Berth resources/s ÷ Rill-on-River resources/s, each the best run
	// targetRillRatioAhead is the throughput issue's target for the same ratio.
	targetRillRatioAhead = 4.0
	// targetSQLite and targetSQLiteP99 are Berth's throughput on SQLite at its best setting,
	// in resources/s, and its p99 insert-to-ready at the latency run's rate.
	targetSQLite    = 4000
	targetSQLiteP99 = 8 * time.Millisecond
)

// config is what one bench run measures, from flags and environment.
type config struct {
	server           string // maintenance-database URL
	binary           string // the agent binary
	n                int
	stores           []string // the stores Berth is measured on
	sqliteN          int      // resources in each throughput run on SQLite
	berthConcurrency []int
	// berthDefault adds a throughput run on each store at the agent's default settings.
	berthDefault      bool
	sqliteConcurrency []int
	riverWorkers      []int
	rillWorkers       []int // River MaxWorkers of the Rill-on-River runs; none: skipped
	// throughputRounds is how many times each throughput run of Berth, River and the Rill
	// peer is made, every setting once per round in turn.
	throughputRounds int
	latencyN         int
	rate             float64
	sideBySide       bool // one more latency run of Berth and River at once (sideBySideLatency)
	waitTimeout      time.Duration

	compare           bool // measure Berth beside River
	healthN           int  // ready resources in the health sweep; 0 skips it
	healthConcurrency int

	agentCounts       []int         // agents of each throughput run on one PostgreSQL database; empty skips them
	agentsN           int           // resources in each of those runs and in the failover run
	agentsRounds      int           // how many times each count of agentCounts is run
	agentConcurrency  int           // each agent's --concurrency in those runs and the failover run
	failover          bool          // measure failover after a SIGKILL
	failoverAgents    int           // agents in the failover run
	failoverTTL       time.Duration // their --agent-ttl
	failoverHeartbeat time.Duration // their --heartbeat-interval

	scaleN           int // runtimes in the scale run's burst and in its restart's backlog; 0 skips it
	scaleConcurrency int // the scale run's agent --concurrency; 0: the fastest PostgreSQL throughput run's

	fairN      int   // runtimes in owner A's burst of the fairness runs; 0 skips them
	fairAgents []int // agents of each fairness run

	sleepAgents      []int         // agents of each run on the sleep broker; empty skips them
	sleepN           int           // resources in each of those runs
	sleepDelay       time.Duration // how long each of the sleep broker's reconciles waits
	sleepConcurrency int           // each agent's --concurrency in those runs
	sleepBinary      string        // the agent built with the sleep broker (build tag benchbroker)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run measures, prints the report and returns the exit code: 0 when every measurement was
// made (targets met or missed), 1 when one failed, 2 on bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	rep := &report{cfg: cfg}
	err = measure(ctx, cfg, rep)
	rep.print(stdout)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stdout, "bench: interrupted")
		return 1
	case err != nil:
		fmt.Fprintln(stdout, "bench: FAILED:", err)
		return 1
	}
	fmt.Fprintln(stdout, "bench: ok")
	return 0
}

func parseConfig(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{binary: os.Getenv("BERTH_BINARY"), sleepBinary: os.Getenv("BERTH_BENCHBROKER_BINARY")}
	if cfg.binary == "" {
		cfg.binary = "./bin/berth"
	}
	if cfg.sleepBinary == "" {
		cfg.sleepBinary = "./bin/berth-benchbroker"
	}
	fs.IntVar(&cfg.n, "n", 10000, "resources (and River jobs) in each throughput run on PostgreSQL")
	stores := fs.String("stores", storePostgres+","+storeSQLite, "comma-separated stores to measure Berth on: postgres, sqlite")
	fs.IntVar(&cfg.sqliteN, "sqlite-n", 2000, "resources in each Berth throughput run on SQLite (it commits one write at a time: a smaller run says as much)")
	sqliteConcurrency := fs.String("sqlite-concurrency", "16,64,256", "comma-separated agent --concurrency values on SQLite, one throughput run each")
	fs.BoolVar(&cfg.berthDefault, "berth-default", true, fmt.Sprintf("also one throughput run on each store at the agent's default settings (its limit adapting from 16 up to --concurrency %d)", provisioner.DefaultConcurrency))
	concurrency := fs.String("berth-concurrency", "16,64,256", "comma-separated agent --concurrency values on PostgreSQL, one throughput run each")
	workers := fs.String("river-workers", "10,50,100,200", "comma-separated River MaxWorkers values, one throughput run each")
	rillWorkers := fs.String("rill-workers", "10,100,200", "comma-separated River MaxWorkers values of Rill's static provisioning on River, one throughput run each (10 is Rill's default); \"\" skips it")
	fs.IntVar(&cfg.throughputRounds, "throughput-rounds", 3, "rounds of the throughput runs of Berth (each store), River and Rill's statements, every setting once per round in turn; each setting's fastest run is reported, beside every round's rate")
	fs.IntVar(&cfg.latencyN, "latency-n", 300, "resources (and River jobs) in each latency run")
	fs.Float64Var(&cfg.rate, "rate", 20, "inserts per second in the latency runs")
	fs.BoolVar(&cfg.sideBySide, "side-by-side", true, "one more latency run with Berth (PostgreSQL) and River at once, their inserts alternating, each at -rate: the p99 target compares these two")
	fs.DurationVar(&cfg.waitTimeout, "wait-timeout", 10*time.Minute, "how long one run may wait for its resources or jobs")
	fs.BoolVar(&cfg.compare, "compare", true, "measure Berth's throughput and latency beside River's, with several agents and failover (-compare=false: the health sweep alone)")
	agents := fs.String("agents", "1,2,3", `comma-separated agent counts, one throughput run of -agents-n resources each, the agents on one PostgreSQL database ("" skips them)`)
	fs.IntVar(&cfg.agentsN, "agents-n", 3000, "resources in each run of -agents and in the failover run")
	fs.IntVar(&cfg.agentsRounds, "agents-rounds", 3, "rounds of the -agents and -sleep-agents runs, each count once per round; each count's fastest run is reported")
	fs.IntVar(&cfg.agentConcurrency, "agents-concurrency", 16, "each agent's --concurrency in the runs of -agents and -failover")
	fs.BoolVar(&cfg.failover, "failover", true, "measure failover: -failover-agents drain -agents-n resources and one is killed with SIGKILL mid-burst")
	fs.IntVar(&cfg.failoverAgents, "failover-agents", 3, "agents in the failover run (at least 2)")
	fs.DurationVar(&cfg.failoverTTL, "failover-agent-ttl", 15*time.Second, "the failover run's agents' --agent-ttl (the agent's default)")
	fs.DurationVar(&cfg.failoverHeartbeat, "failover-heartbeat-interval", 2*time.Second, "the failover run's agents' --heartbeat-interval (the agent's default)")
	fs.IntVar(&cfg.scaleN, "scale-n", 100000, "runtimes of the scale run on PostgreSQL: a burst inserted at once, then as many waiting for a restarted agent (each drain takes 3 to 5 minutes at 100,000 on 2 cores); 0 skips it")
	fs.IntVar(&cfg.scaleConcurrency, "scale-concurrency", 0, "the scale run's agent --concurrency, fixed; 0 takes the setting of the fastest PostgreSQL throughput run, the agent's default settings when that run was at them")
	fs.IntVar(&cfg.fairN, "fair-n", 8000, "runtimes of owner A's burst in the fairness runs (owner B inserts one 0.3 s later); 0 skips them")
	fairAgents := fs.String("fair-agents", "1,3", "comma-separated agent counts, one fairness run each")
	sleepAgents := fs.String("sleep-agents", "1,3", `comma-separated agent counts, one run each on the sleep broker (every reconcile waits -sleep-delay; the agent of BERTH_BENCHBROKER_BINARY, built with the tag benchbroker) ("" skips them)`)
	fs.IntVar(&cfg.sleepN, "sleep-n", 3000, "resources in each run of -sleep-agents")
	fs.DurationVar(&cfg.sleepDelay, "sleep-delay", 500*time.Millisecond, "how long each reconcile of the sleep broker waits")
	fs.IntVar(&cfg.sleepConcurrency, "sleep-concurrency", defaultSleepConcurrency, "each agent's --concurrency in the runs of -sleep-agents: one agent does at most this / -sleep-delay a second, which must stay below what the database takes")
	fs.IntVar(&cfg.healthN, "health-n", 100000, "ready resources in the health sweep; 0 skips it")
	fs.IntVar(&cfg.healthConcurrency, "health-concurrency", 8, "resource checks in flight at once in the health sweep (the agent's --health-concurrency)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.stores, err = storeList(*stores); err != nil {
		return cfg, err
	}
	if cfg.berthConcurrency, err = positiveInts("-berth-concurrency", *concurrency); err != nil {
		return cfg, err
	}
	if cfg.sqliteConcurrency, err = positiveInts("-sqlite-concurrency", *sqliteConcurrency); err != nil {
		return cfg, err
	}
	if cfg.riverWorkers, err = positiveInts("-river-workers", *workers); err != nil {
		return cfg, err
	}
	if cfg.agentCounts, err = agentCounts(*agents); err != nil {
		return cfg, err
	}
	if cfg.fairAgents, err = positiveInts("-fair-agents", *fairAgents); err != nil {
		return cfg, err
	}
	if strings.TrimSpace(*sleepAgents) != "" {
		if cfg.sleepAgents, err = positiveInts("-sleep-agents", *sleepAgents); err != nil {
			return cfg, fmt.Errorf("%w (or \"\" to skip the runs on the sleep broker)", err)
		}
	}
	if strings.TrimSpace(*rillWorkers) != "" {
		if cfg.rillWorkers, err = positiveInts("-rill-workers", *rillWorkers); err != nil {
			return cfg, err
		}
	}
	switch {
	case cfg.n < 1:
		return cfg, fmt.Errorf("-n must be at least 1, got %d", cfg.n)
	case cfg.sqliteN < 1:
		return cfg, fmt.Errorf("-sqlite-n must be at least 1, got %d", cfg.sqliteN)
	case cfg.latencyN < 1:
		return cfg, fmt.Errorf("-latency-n must be at least 1, got %d", cfg.latencyN)
	case cfg.rate <= 0:
		return cfg, fmt.Errorf("-rate must be positive, got %g", cfg.rate)
	case cfg.waitTimeout <= 0:
		return cfg, fmt.Errorf("-wait-timeout must be positive, got %s", cfg.waitTimeout)
	case cfg.scaleN < 0:
		return cfg, fmt.Errorf("-scale-n must be at least 0 (0 skips the scale run), got %d", cfg.scaleN)
	case cfg.scaleConcurrency < 0:
		return cfg, fmt.Errorf("-scale-concurrency must be at least 0 (0 takes the fastest PostgreSQL throughput run's setting), got %d", cfg.scaleConcurrency)
	case cfg.healthN < 0:
		return cfg, fmt.Errorf("-health-n must be at least 0 (0 skips the health sweep), got %d", cfg.healthN)
	case cfg.healthConcurrency < 1:
		return cfg, fmt.Errorf("-health-concurrency must be at least 1, got %d", cfg.healthConcurrency)
	case cfg.fairN < 0:
		return cfg, fmt.Errorf("-fair-n must be at least 0 (0 skips the fairness runs), got %d", cfg.fairN)
	case !cfg.compare && cfg.healthN == 0 && cfg.fairN == 0:
		return cfg, errors.New("nothing to measure: -compare=false, -health-n 0 and -fair-n 0")
	case cfg.agentsN < 1:
		return cfg, fmt.Errorf("-agents-n must be at least 1, got %d", cfg.agentsN)
	case cfg.agentsRounds < 1:
		return cfg, fmt.Errorf("-agents-rounds must be at least 1, got %d", cfg.agentsRounds)
	case cfg.throughputRounds < 1:
		return cfg, fmt.Errorf("-throughput-rounds must be at least 1, got %d", cfg.throughputRounds)
	case cfg.sleepN < 1:
		return cfg, fmt.Errorf("-sleep-n must be at least 1, got %d", cfg.sleepN)
	case cfg.sleepDelay <= 0:
		return cfg, fmt.Errorf("-sleep-delay must be positive, got %s", cfg.sleepDelay)
	case cfg.sleepConcurrency < 1:
		return cfg, fmt.Errorf("-sleep-concurrency must be at least 1, got %d", cfg.sleepConcurrency)
	case cfg.agentConcurrency < 1:
		return cfg, fmt.Errorf("-agents-concurrency must be at least 1, got %d", cfg.agentConcurrency)
	case cfg.failover && cfg.failoverAgents < 2:
		return cfg, fmt.Errorf("-failover-agents must be at least 2 (one is killed, another takes over), got %d", cfg.failoverAgents)
	case cfg.failover && cfg.failoverHeartbeat <= 0:
		return cfg, fmt.Errorf("-failover-heartbeat-interval must be positive, got %s", cfg.failoverHeartbeat)
	case cfg.failover && cfg.failoverTTL < 2*cfg.failoverHeartbeat:
		return cfg, fmt.Errorf("-failover-agent-ttl (%s) must be at least twice -failover-heartbeat-interval (%s), as berth run requires", cfg.failoverTTL, cfg.failoverHeartbeat)
	}
	if _, err := exec.LookPath(cfg.binary); err != nil {
		return cfg, fmt.Errorf("no agent binary at %s: build it with make build, or set BERTH_BINARY", cfg.binary)
	}
	if _, err := exec.LookPath(cfg.sleepBinary); err != nil && cfg.compare && len(cfg.sleepAgents) > 0 {
		return cfg, fmt.Errorf("no agent binary with the sleep broker at %s: build it with go build -tags benchbroker -o %s ./cmd/agent (make bench-static does), set BERTH_BENCHBROKER_BINARY, or pass -sleep-agents \"\"", cfg.sleepBinary, cfg.sleepBinary)
	}
	cfg.server, err = serverURL()
	return cfg, err
}

// positiveInts parses a comma-separated list of positive integers given to flag name.
func positiveInts(name, list string) ([]int, error) {
	var out []int
	for _, field := range strings.Split(list, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer; give a list like 16,64", name, field)
		}
		out = append(out, v)
	}
	return out, nil
}

// storeList parses -stores.
func storeList(list string) ([]string, error) {
	var out []string
	for _, field := range strings.Split(list, ",") {
		name := strings.TrimSpace(field)
		if name != storePostgres && name != storeSQLite {
			return nil, fmt.Errorf("-stores: %q is not a store; give a list of postgres and sqlite, e.g. postgres,sqlite", field)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// measure runs every measurement in turn, filling rep as results arrive.
func measure(ctx context.Context, cfg config, rep *report) error {
	if cfg.fairN > 0 {
		if err := fairnessRuns(ctx, cfg, rep); err != nil {
			return err
		}
	}
	if cfg.compare {
		if err := compare(ctx, cfg, rep); err != nil {
			return err
		}
		if err := scale(ctx, cfg, rep); err != nil {
			return err
		}
		if err := sleepRuns(ctx, cfg, rep); err != nil {
			return err
		}
		if cfg.scaleN > 0 {
			f := scaleAgent(cfg, rep)
			res, err := backlog(ctx, cfg, f)
			if err != nil {
				return fmt.Errorf("scale run of %d runtimes (%s): %w", cfg.scaleN, f.setting(), err)
			}
			rep.backlog = &res
		}
	}
	if cfg.healthN == 0 {
		return nil
	}
	res, err := healthSweep(ctx, cfg)
	if err != nil {
		return fmt.Errorf("health sweep of %d resources: %w", cfg.healthN, err)
	}
	rep.health = &res
	return nil
}

// compare measures Berth's throughput on each store, River's and the Rill peer's, in
// -throughput-rounds rounds (so that a machine's changing load falls on every setting alike),
// then the latencies at each side's fastest setting.
func compare(ctx context.Context, cfg config, rep *report) error {
	for range cfg.throughputRounds {
		for _, kind := range cfg.stores {
			if err := berthThroughputRound(ctx, cfg, kind, rep.berthOn(kind)); err != nil {
				return fmt.Errorf("berth on %s: %w", kind, err)
			}
		}
		for i, w := range cfg.riverWorkers {
			res, err := riverThroughput(ctx, cfg, w)
			if err != nil {
				return fmt.Errorf("river throughput at MaxWorkers %d: %w", w, err)
			}
			rep.river = keepFastest(rep.river, i, res)
		}
		for i, w := range cfg.rillWorkers {
			res, err := rillThroughput(ctx, cfg, w)
			if err != nil {
				return fmt.Errorf("rill on river throughput at MaxWorkers %d: %w", w, err)
			}
			rep.rill = keepFastestRill(rep.rill, i, res)
		}
	}
	for _, kind := range cfg.stores {
		if err := berthLatencyAtFastest(ctx, cfg, kind, rep.berthOn(kind)); err != nil {
			return fmt.Errorf("berth on %s: %w", kind, err)
		}
	}
	best := fastest(rep.river)
	lat, err := riverLatency(ctx, cfg, best.parallel)
	if err != nil {
		return fmt.Errorf("river latency: %w", err)
	}
	if rep.riverLatency, err = summarize(best.setting, lat); err != nil {
		return err
	}
	pg := rep.berthResults(storePostgres)
	if !cfg.sideBySide || pg == nil || len(pg.throughput) == 0 {
		return nil
	}
	res, err := sideBySideLatency(ctx, cfg, fastest(pg.throughput), best.parallel)
	if err != nil {
		return fmt.Errorf("berth and river latency side by side: %w", err)
	}
	rep.sideBySide = &res
	return nil
}

// berthThroughputRound makes one round of Berth's throughput runs on a store: one at each
// concurrency, then one at the agent's default settings.
func berthThroughputRound(ctx context.Context, cfg config, kind string, res *berthResults) error {
	n, concurrency := cfg.n, cfg.berthConcurrency
	if kind == storeSQLite {
		n, concurrency = cfg.sqliteN, cfg.sqliteConcurrency
	}
	for i, c := range concurrency {
		run, err := berthThroughput(ctx, cfg, kind, n, c)
		if err != nil {
			return fmt.Errorf("throughput at concurrency %d: %w", c, err)
		}
		res.throughput = keepFastest(res.throughput, i, run)
	}
	if cfg.berthDefault {
		res.atDefault = len(concurrency)
		run, _, err := burst(ctx, cfg, kind, fleet{agents: 1, concurrency: provisioner.DefaultConcurrency, adaptive: true}, n)
		if err != nil {
			return fmt.Errorf("throughput at the default settings: %w", err)
		}
		res.throughput = keepFastest(res.throughput, res.atDefault, run)
	}
	return nil
}

// berthLatencyAtFastest measures Berth's latency on a store at its fastest throughput run's
// setting.
func berthLatencyAtFastest(ctx context.Context, cfg config, kind string, res *berthResults) error {
	best := fastest(res.throughput)
	lat, err := berthLatency(ctx, cfg, kind, best.agentFleet())
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	if res.latency, err = summarize(best.setting, lat.ready); err != nil {
		return err
	}
	if len(lat.insert) > 0 {
		if res.insertPart, err = summarize(best.setting, lat.insert); err != nil {
			return err
		}
		res.agentPart, err = summarize(best.setting, lat.agent)
	}
	return err
}

// fastest is the run with the highest throughput; runs is not empty.
func fastest(runs []throughputResult) throughputResult {
	best := runs[0]
	for _, r := range runs[1:] {
		if r.perSecond() > best.perSecond() {
			best = r
		}
	}
	return best
}
