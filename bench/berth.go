package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// berthRun is one Berth measurement: a fresh database, its schema, and an agent on it.
type berthRun struct {
	db    *database
	pool  *pgxpool.Pool
	agent *agent
}

// startBerth prepares a database and starts an agent on it with room for slots resources,
// then waits for a warm-up resource so agent start-up is not part of what is measured.
// The caller must close the run.
func startBerth(ctx context.Context, cfg config, concurrency, slots int) (*berthRun, error) {
	db, err := createDatabase(ctx, cfg.server)
	if err != nil {
		return nil, err
	}
	r := &berthRun{db: db}
	if err := r.start(ctx, cfg, concurrency, slots); err != nil {
		return nil, errors.Join(err, r.close())
	}
	return r, nil
}

func (r *berthRun) start(ctx context.Context, cfg config, concurrency, slots int) error {
	if err := migrate(ctx, cfg.binary, r.db.url); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, r.db.url)
	if err != nil {
		return fmt.Errorf("connect to the bench database: %w", err)
	}
	r.pool = pool
	if r.agent, err = startAgent(cfg.binary, r.db.url, concurrency, slots+1); err != nil {
		return err
	}
	if err := r.insert(ctx, "warmup", 1); err != nil {
		return err
	}
	return r.waitReady(ctx, cfg, "warmup", 1)
}

// close stops the agent, then drops the database.
func (r *berthRun) close() error {
	var err error
	if r.agent != nil {
		err = r.agent.stop()
	}
	if r.pool != nil {
		r.pool.Close()
	}
	r.db.drop()
	return err
}

// insert adds n runtime resources named prefix-0 … prefix-(n-1) in one statement.
func (r *berthRun) insert(ctx context.Context, prefix string, n int) error {
	_, err := r.pool.Exec(ctx, `
		INSERT INTO resources (type, name, owner, args)
		SELECT 'runtime', $1 || '-' || i, 'owner-' || (i % 50), '{"slots":1}'
		  FROM generate_series(0, $2 - 1) AS i`, prefix, n)
	if err != nil {
		return fmt.Errorf("insert %d resources: %w", n, err)
	}
	return nil
}

// waitReady polls until n resources named prefix-* are ready, the agent dies, or the wait
// times out; on a timeout it reports the status counts.
func (r *berthRun) waitReady(ctx context.Context, cfg config, prefix string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.waitTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var ready int
		err := r.pool.QueryRow(ctx, `
			SELECT count(*) FROM resources WHERE status = 'ready' AND name LIKE $1 || '-%'`,
			prefix).Scan(&ready)
		switch {
		case err == nil && ready >= n:
			return nil
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("count ready resources: %w", err)
		}
		if err := r.agent.alive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ctx.Err()
			}
			return fmt.Errorf("%d of %d %s resources ready after %s; statuses: %s; agent output:\n%s",
				ready, n, prefix, cfg.waitTimeout, r.statusCounts(), r.agent.log)
		case <-tick.C:
		}
	}
}

// statusCounts summarises the resources table for a failure report.
func (r *berthRun) statusCounts() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := r.pool.Query(ctx, `SELECT status, count(*) FROM resources GROUP BY status ORDER BY status`)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return "unknown (" + err.Error() + ")"
		}
		parts = append(parts, fmt.Sprintf("%s=%d", status, n))
	}
	return strings.Join(parts, " ")
}

// throughputResult is one Berth or River throughput run.
type throughputResult struct {
	setting  string        // e.g. "concurrency=16"
	parallel int           // the agent's concurrency or River's MaxWorkers
	n        int           // resources or jobs
	elapsed  time.Duration // time to make all of them ready or completed
	peakRSS  int64         // agent's VmHWM in bytes; 0 when not measured
}

func (t throughputResult) perSecond() float64 { return float64(t.n) / t.elapsed.Seconds() }

// berthThroughput inserts cfg.n resources at once and times them to ready.
func berthThroughput(ctx context.Context, cfg config, concurrency int) (res throughputResult, err error) {
	r, err := startBerth(ctx, cfg, concurrency, cfg.n)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	if err := r.insert(ctx, "bench", cfg.n); err != nil {
		return res, err
	}
	if err := r.waitReady(ctx, cfg, "bench", cfg.n); err != nil {
		return res, err
	}
	if res.peakRSS, err = r.agent.peakRSS(); err != nil {
		return res, err
	}
	var seconds float64
	err = r.pool.QueryRow(ctx, `
		SELECT count(*), extract(epoch FROM max(ready_at) - min(created_at))::float8
		  FROM resources WHERE name LIKE 'bench-%'`).Scan(&res.n, &seconds)
	if err != nil {
		return res, fmt.Errorf("read ready times: %w", err)
	}
	res.setting, res.parallel = fmt.Sprintf("concurrency=%d", concurrency), concurrency
	res.elapsed = time.Duration(seconds * float64(time.Second))
	slog.Info("berth throughput", "concurrency", concurrency, "resources", res.n, "elapsed", res.elapsed.Round(time.Millisecond))
	return res, nil
}

// berthLatency inserts cfg.latencyN resources one at a time at cfg.rate and returns each
// one's ready_at - created_at.
func berthLatency(ctx context.Context, cfg config, concurrency int) (lat []time.Duration, err error) {
	r, err := startBerth(ctx, cfg, concurrency, cfg.latencyN)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	err = paced(ctx, cfg.latencyN, cfg.rate, func(ctx context.Context, i int) error {
		_, err := r.pool.Exec(ctx, `
			INSERT INTO resources (type, name, owner, args)
			VALUES ('runtime', 'latency-' || $1::int, 'owner-' || ($1::int % 50), '{"slots":1}')`, i)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert latency resources: %w", err)
	}
	if err := r.waitReady(ctx, cfg, "latency", cfg.latencyN); err != nil {
		return nil, err
	}
	return durations(ctx, r.pool, `
		SELECT extract(epoch FROM ready_at - created_at)::float8
		  FROM resources WHERE name LIKE 'latency-%'`)
}
