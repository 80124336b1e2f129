package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/juju/clock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/worker/environcheck"
	"github.com/berth-dev/berth/worker/healthcheck"
)

// The health checker's settings in the agent (manifolds), which the sweep keeps.
const (
	healthPageSize            = 500
	healthCheckTimeout        = 30 * time.Second
	healthEnvironCheckTimeout = time.Minute
	// healthHolder is the sweep's lease identity; no other agent holds a lease on its rows.
	healthHolder = "bench-health"
)

// healthResult is one measured health sweep.
type healthResult struct {
	resources, hosts, concurrency int

	elapsed      time.Duration  // worker start to the last check counted and the environ Check done
	checksDone   time.Duration  // worker start to the last resource check counted
	environCheck time.Duration  // worker start to the environ's Check done (it runs beside the checks)
	results      map[string]int // checks by result
	calls        map[string]int64
	probes       int64         // health probes the hosts answered
	cpu          time.Duration // the bench process's user+system CPU during the sweep
	db           dbStats       // the database's counters over the sweep
}

func (h healthResult) checks() int {
	n := 0
	for _, c := range h.results {
		n += c
	}
	return n
}

func (h healthResult) perSecond() float64 { return float64(h.checks()) / h.elapsed.Seconds() }

// statementCalls are the store calls the sweep makes that each run one statement.
var statementCalls = []string{"CountResourcesByStatus", "ListCheckable", "GetReservation", "GetReservations", "GetResource", "MissingResources", "ListReservations", "ReservedByHost", "OrphanedReservations"}

// healthSweep measures one round of the health checker over cfg.healthN ready runtimes of a
// static pool whose hosts are local HTTP servers answering the health path: the real worker,
// environ and database code, on the wall clock, as the agent runs them (see doc.go).
func healthSweep(ctx context.Context, cfg config) (res healthResult, err error) {
	res = healthResult{resources: cfg.healthN, concurrency: cfg.healthConcurrency}
	db, err := createDatabase(ctx, cfg.server)
	if err != nil {
		return res, err
	}
	defer db.drop()
	hosts, err := startHosts((cfg.healthN + slotsPerHost - 1) / slotsPerHost)
	if err != nil {
		return res, err
	}
	defer hosts.close()
	res.hosts = len(hosts.urls)
	setJSON, err := healthSet(hosts.urls)
	if err != nil {
		return res, err
	}
	setupStart := time.Now()
	if err := fillReady(ctx, db, setJSON, hosts.urls, cfg.healthN); err != nil {
		return res, err
	}
	slog.Info("health sweep: resources in place", "resources", cfg.healthN, "hosts", res.hosts, "took", time.Since(setupStart).Round(time.Millisecond))

	stats, err := openStatsReader(ctx, cfg.server, db.name)
	if err != nil {
		return res, err
	}
	defer stats.close()
	before, err := stats.read(ctx)
	if err != nil {
		return res, err
	}
	tableWritesBefore, err := berthTableWrites(ctx, db.url)
	if err != nil {
		return res, err
	}
	probesBefore := hosts.probes()
	if err := sweep(ctx, db, setJSON, cfg, &res); err != nil {
		return res, err
	}
	res.probes = hosts.probes() - probesBefore
	after, err := stats.read(ctx)
	if err != nil {
		return res, err
	}
	res.db = after.minus(before)
	tableWritesAfter, err := berthTableWrites(ctx, db.url)
	if err != nil {
		return res, err
	}
	if written, rows := res.calls["RecordHealth"], tableWritesAfter-tableWritesBefore; written > 0 || rows > 0 {
		return res, fmt.Errorf("the sweep wrote %d rows of Berth's tables (%d health records): the bench's resources should all be healthy and as the environ reports them",
			rows, written)
	}
	slog.Info("health sweep", "checks", res.checks(), "elapsed", res.elapsed.Round(time.Millisecond))
	return res, nil
}

// sweep runs the health checker until its first round has checked every resource, then
// stops it and waits until the database has its connections' statistics.
func sweep(ctx context.Context, db *database, setJSON []byte, cfg config, res *healthResult) error {
	st, err := postgres.Open(ctx, db.url, postgres.PoolConfig{})
	if err != nil {
		return err
	}
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	calls := newCallCounter()
	registry := environ.NewRegistry()
	registry.Register(static.Type, static.New, static.Types...)
	set, err := registry.NewSet(setJSON, provisionerName, environ.Deps{
		Slots:     countingSlots{st, calls},
		Resources: countingResources{st, calls},
		Logger:    logger,
		Clock:     clock.WallClock,
	})
	if err != nil {
		return fmt.Errorf("build the provisioner set: %w", err)
	}
	defer set.Close()

	// Later rounds wait at their first call until the worker is stopped: only the first
	// round is measured.
	observed := newSweepMetrics(res.resources)
	gate := &roundGate{environChecked: observed.environChecked}
	cpuBefore := processCPU()
	started := time.Now()
	w, err := healthcheck.NewWorker(healthcheck.Config{
		Store:    countingStore{st, calls, gate},
		Environs: gatedEnvirons{set, gate},
		Locks:    new(resourcelock.Set),
		Clock:    clock.WallClock,
		Rand:     rand.Float64,
		Logger:   logger,
		Metrics:  observed,
		Settings: healthcheck.Settings{
			Agent: domain.AgentIdentity{ID: healthHolder, TTL: domain.DefaultAgentTTL},
			// Every check is due at once, so the round runs as fast as Concurrency allows;
			// the agent spreads the same checks over its --health-interval.
			Interval:     time.Nanosecond,
			Concurrency:  cfg.healthConcurrency,
			PageSize:     healthPageSize,
			CheckTimeout: healthCheckTimeout,
		},
	})
	if err != nil {
		return err
	}
	// The environ's Check runs beside the checks, as the leader's environ checker runs it.
	ew, err := environcheck.NewWorker(environcheck.Config{
		Environs: gatedEnvirons{set, gate},
		Clock:    clock.WallClock,
		Logger:   logger,
		Metrics:  observed,
		Settings: environcheck.Settings{
			Interval:     time.Nanosecond,
			CheckTimeout: healthEnvironCheckTimeout,
		},
	})
	if err != nil {
		w.Kill()
		_ = w.Wait()
		return err
	}
	waitErr := observed.wait(ctx, cfg.waitTimeout)
	res.elapsed = time.Since(started)
	res.cpu = processCPU() - cpuBefore
	res.calls = calls.snapshot()
	res.results, res.checksDone, res.environCheck = observed.snapshot()
	w.Kill()
	ew.Kill()
	if err := w.Wait(); err != nil && waitErr == nil {
		waitErr = fmt.Errorf("health checker: %w", err)
	}
	if err := ew.Wait(); err != nil && waitErr == nil {
		waitErr = fmt.Errorf("environ checker: %w", err)
	}
	if waitErr != nil {
		return waitErr
	}
	if err := observed.environError(); err != nil {
		return fmt.Errorf("the pool's Check failed during the sweep: %w", err)
	}
	st.Close()
	return waitDisconnected(ctx, db)
}

// healthSet is the provisioner set of the sweep: one static pool over hosts, probed on the
// default health path.
func healthSet(hosts []string) ([]byte, error) {
	runtimes := make([]map[string]any, len(hosts))
	for i, h := range hosts {
		runtimes[i] = map[string]any{"host": h, "slots": slotsPerHost}
	}
	return json.Marshal(map[string]any{provisionerName: map[string]any{
		"type": static.Type,
		"spec": map[string]any{"runtimes": runtimes, "health_path": static.DefaultHealthPath},
	}})
}

// fillReady inserts n ready runtimes with their slot reservations, slotsPerHost to a host,
// as if the agent had provisioned them: each host's state and config are what the environ
// itself reports for a runtime there. The tables' triggers (history, change log) are off
// during the bulk insert; they are beside the point of a sweep.
func fillReady(ctx context.Context, db *database, setJSON []byte, hosts []string, n int) error {
	st, err := postgres.Open(ctx, db.url, postgres.PoolConfig{})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	pool := st.Pool()
	if _, err := pool.Exec(ctx, `
		INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
		SELECT $1, gen_random_uuid(), 'owner-' || i % 50, ($2::text[])[i / $3 + 1], 1
		  FROM generate_series(0, $4 - 1) AS i`, provisionerName, hosts, slotsPerHost, n); err != nil {
		return fmt.Errorf("insert %d slot reservations: %w", n, err)
	}

	registry := environ.NewRegistry()
	registry.Register(static.Type, static.New, static.Types...)
	set, err := registry.NewSet(setJSON, provisionerName, environ.Deps{Slots: st, Clock: clock.WallClock})
	if err != nil {
		return fmt.Errorf("build the provisioner set: %w", err)
	}
	defer set.Close()
	env, _, err := set.Get(provisionerName)
	if err != nil {
		return err
	}
	var states, configs [][]byte
	var used []string
	for _, host := range hosts {
		var id string
		err := pool.QueryRow(ctx, `SELECT resource_id::text FROM slot_reservations WHERE host = $1 LIMIT 1`, host).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read a reservation on %s: %w", host, err)
		}
		out, err := env.CheckResource(ctx, &environ.Resource{ID: id, Type: domain.ResourceTypeRuntime},
			&environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1})
		if err != nil {
			return fmt.Errorf("ask the pool for a runtime's state and config on %s: %w", host, err)
		}
		state, err := json.Marshal(out.State)
		if err != nil {
			return err
		}
		config, err := json.Marshal(out.Config)
		if err != nil {
			return err
		}
		used, states, configs = append(used, host), append(states, state), append(configs, config)
	}

	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`ALTER TABLE resources DISABLE TRIGGER USER`, nil},
		{`INSERT INTO resources (id, type, name, owner, provisioner, args, status, reason, status_message,
		                         observed_generation, state, config, ready_at)
		  SELECT r.resource_id, 'runtime', 'sweep-' || row_number() OVER (ORDER BY r.resource_id), r.owner, r.provisioner,
		         '{"slots": 1}', 'ready', 'Available', 'ready at generation 1', 1, h.state, h.config, now()
		    FROM slot_reservations r
		    JOIN unnest($1::text[], $2::jsonb[], $3::jsonb[]) AS h(host, state, config) ON h.host = r.host`,
			[]any{used, states, configs}},
		{`ALTER TABLE resources ENABLE TRIGGER USER`, nil},
		{`VACUUM ANALYZE resources, slot_reservations, slot_host_usage, slot_owner_usage`, nil},
	} {
		if _, err := pool.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			return fmt.Errorf("fill the resources table: %w", err)
		}
	}
	var ready int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM resources WHERE status = 'ready'`).Scan(&ready); err != nil {
		return err
	}
	if ready != n {
		return fmt.Errorf("inserted %d ready resources, want %d", ready, n)
	}
	st.Close()
	return waitDisconnected(ctx, db)
}

// localHosts are HTTP servers on the loopback interface standing in for a pool's runtime
// hosts: each answers the health path and counts the probes.
type localHosts struct {
	urls    []string
	servers []*http.Server
	count   atomic.Int64
	wg      sync.WaitGroup
}

func startHosts(n int) (*localHosts, error) {
	h := &localHosts{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+static.DefaultHealthPath, func(w http.ResponseWriter, _ *http.Request) {
		h.count.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			h.close()
			return nil, fmt.Errorf("listen for a local runtime host: %w", err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		h.servers = append(h.servers, srv)
		h.urls = append(h.urls, "http://"+l.Addr().String())
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			_ = srv.Serve(l)
		}()
	}
	return h, nil
}

func (h *localHosts) probes() int64 { return h.count.Load() }

func (h *localHosts) close() {
	for _, srv := range h.servers {
		_ = srv.Close()
	}
	h.wg.Wait()
}

// berthTableWrites sums the rows inserted, updated and deleted in the bench database's own
// tables. Unlike pg_stat_database's counters it leaves out the catalogs, which autovacuum's
// ANALYZE writes at moments of its own choosing.
func berthTableWrites(ctx context.Context, url string) (int64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("connect to the bench database: %w", err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(ctx, `
		SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read the bench tables' statistics: %w", err)
	}
	return n, nil
}

// dbStats are a database's cumulative counters from pg_stat_database.
type dbStats struct {
	xactCommit, xactRollback, blksRead, blksHit                  int64
	tupReturned, tupFetched, tupInserted, tupUpdated, tupDeleted int64
}

func (s dbStats) minus(o dbStats) dbStats {
	return dbStats{
		xactCommit: s.xactCommit - o.xactCommit, xactRollback: s.xactRollback - o.xactRollback,
		blksRead: s.blksRead - o.blksRead, blksHit: s.blksHit - o.blksHit,
		tupReturned: s.tupReturned - o.tupReturned, tupFetched: s.tupFetched - o.tupFetched,
		tupInserted: s.tupInserted - o.tupInserted, tupUpdated: s.tupUpdated - o.tupUpdated,
		tupDeleted: s.tupDeleted - o.tupDeleted,
	}
}

// statsReader reads a database's counters over a connection to the maintenance database,
// so that reading them adds nothing to them.
type statsReader struct {
	conn *pgx.Conn
	name string
}

func openStatsReader(ctx context.Context, server, name string) (*statsReader, error) {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("connect to the bench server: %w", err)
	}
	return &statsReader{conn: conn, name: name}, nil
}

func (r *statsReader) read(ctx context.Context) (dbStats, error) {
	var s dbStats
	err := r.conn.QueryRow(ctx, `
		SELECT xact_commit, xact_rollback, blks_read, blks_hit,
		       tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted
		  FROM pg_stat_database WHERE datname = $1`, r.name).Scan(
		&s.xactCommit, &s.xactRollback, &s.blksRead, &s.blksHit,
		&s.tupReturned, &s.tupFetched, &s.tupInserted, &s.tupUpdated, &s.tupDeleted)
	if err != nil {
		return s, fmt.Errorf("read the database's statistics: %w", err)
	}
	return s, nil
}

func (r *statsReader) close() { _ = r.conn.Close(context.Background()) }

// waitDisconnected waits until no client session is connected to the database: a session
// hands its statistics to the server's counters when it ends, so they are complete after
// that.
func waitDisconnected(ctx context.Context, db *database) error {
	conn, err := pgx.Connect(ctx, db.server)
	if err != nil {
		return fmt.Errorf("connect to the bench server: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var sessions int
		if err := conn.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			 WHERE datname = $1 AND backend_type = 'client backend'`, db.name).Scan(&sessions); err != nil {
			return fmt.Errorf("count the bench database's sessions: %w", err)
		}
		if sessions == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d sessions still connected to %s 30s after the bench closed its own", sessions, db.name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// processCPU is the bench process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
