package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// Rill's static provisioning as it runs on River, the peer platform teams run today: a job
// per resource whose worker makes the statements Rill's admin service and its static
// provisioner make. The worker reads the resource, sums the slots every host has assigned
// (no lock), picks a host with room round-robin from a random start, upserts the
// assignment and marks the resource ok. Two workers may pick the same host with room for
// one, so a pool near full can be overfilled: the run counts the hosts that were.

// rillSchema is the peer's two tables, shaped like Rill's provisioner_resources and
// static_runtime_assignments.
const rillSchema = `
	CREATE TABLE rill_resources (
		id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
		type       text NOT NULL,
		name       text NOT NULL,
		args       jsonb NOT NULL,
		state      jsonb NOT NULL DEFAULT '{}',
		config     jsonb NOT NULL DEFAULT '{}',
		status     int NOT NULL DEFAULT 0,
		created_on timestamptz NOT NULL DEFAULT now(),
		updated_on timestamptz NOT NULL DEFAULT now()
	);
	CREATE TABLE rill_static_runtime_assignments (
		resource_id uuid PRIMARY KEY,
		host        text NOT NULL,
		slots       int NOT NULL,
		created_on  timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX rill_static_runtime_assignments_host_idx ON rill_static_runtime_assignments (host);`

// Rill's resource statuses the peer writes.
const (
	rillStatusPending = 0
	rillStatusOK      = 2
)

// rillArgs is the job: provision one resource.
type rillArgs struct {
	ResourceID string `json:"resource_id"`
}

func (rillArgs) Kind() string { return "bench_rill_provision" }

// rillHost is a host of the peer's pool.
type rillHost struct {
	host, audience string
	slots          int
}

// rillPool is the peer's pool: the hosts of the provisioner set Berth's agent is given
// for the same number of slots.
func rillPool(slots int) []rillHost {
	hosts := make([]rillHost, max(minHosts, (slots+slotsPerHost-1)/slotsPerHost))
	for i := range hosts {
		hosts[i] = rillHost{
			host:     fmt.Sprintf("http://host-%02d.bench:9091", i),
			audience: fmt.Sprintf("http://host-%02d.bench:8081", i),
			slots:    slotsPerHost,
		}
	}
	return hosts
}

// rillWorker is the peer's provisioning job.
type rillWorker struct {
	river.WorkerDefaults[rillArgs]
	pool    *pgxpool.Pool
	hosts   []rillHost
	nextIdx atomic.Int64
}

func newRillWorker(pool *pgxpool.Pool, hosts []rillHost) *rillWorker {
	w := &rillWorker{pool: pool, hosts: hosts}
	w.nextIdx.Store(rand.Int64N(1000))
	return w
}

func (w *rillWorker) Work(ctx context.Context, job *river.Job[rillArgs]) error {
	var (
		rawArgs, rawState []byte
	)
	err := w.pool.QueryRow(ctx, `SELECT args, state FROM rill_resources WHERE id = $1`, job.Args.ResourceID).Scan(&rawArgs, &rawState)
	if err != nil {
		return fmt.Errorf("read resource %s: %w", job.Args.ResourceID, err)
	}
	var args, state struct {
		Slots int `json:"slots"`
	}
	if err := json.Unmarshal(rawArgs, &args); err != nil {
		return fmt.Errorf("args of resource %s: %w", job.Args.ResourceID, err)
	}
	if err := json.Unmarshal(rawState, &state); err != nil {
		return fmt.Errorf("state of resource %s: %w", job.Args.ResourceID, err)
	}
	if state.Slots != 0 {
		return nil
	}
	host, err := w.pick(ctx, args.Slots)
	if err != nil {
		return err
	}
	if _, err := w.pool.Exec(ctx, `
		INSERT INTO rill_static_runtime_assignments (resource_id, host, slots) VALUES ($1, $2, $3)
		ON CONFLICT (resource_id) DO UPDATE SET host = EXCLUDED.host, slots = EXCLUDED.slots`,
		job.Args.ResourceID, host.host, args.Slots); err != nil {
		return fmt.Errorf("assign resource %s to %s: %w", job.Args.ResourceID, host.host, err)
	}
	newState, _ := json.Marshal(map[string]any{"slots": args.Slots})
	config, _ := json.Marshal(map[string]any{
		"host": host.host, "audience": host.audience, "cpu": args.Slots, "memory_gb": 4 * args.Slots,
		"storage_bytes": int64(args.Slots) * 40 << 30,
	})
	if _, err := w.pool.Exec(ctx, `
		UPDATE rill_resources SET status = $2, state = $3, config = $4, updated_on = now() WHERE id = $1`,
		job.Args.ResourceID, rillStatusOK, newState, config); err != nil {
		return fmt.Errorf("mark resource %s ok: %w", job.Args.ResourceID, err)
	}
	return nil
}

// pick sums the slots assigned per host, without a lock, and takes the next host with room.
func (w *rillWorker) pick(ctx context.Context, slots int) (rillHost, error) {
	used, err := rillSlotsUsed(ctx, w.pool)
	if err != nil {
		return rillHost{}, err
	}
	var targets []rillHost
	for _, h := range w.hosts {
		if used[h.host]+slots <= h.slots {
			targets = append(targets, h)
		}
	}
	if len(targets) == 0 {
		return rillHost{}, errors.New("no runtimes found with sufficient available slots")
	}
	return targets[int(w.nextIdx.Add(1)-1)%len(targets)], nil
}

// rillSlotsUsed sums the slots assigned on each host.
func rillSlotsUsed(ctx context.Context, pool *pgxpool.Pool) (map[string]int, error) {
	rows, err := pool.Query(ctx, `SELECT host, sum(slots)::int FROM rill_static_runtime_assignments GROUP BY host`)
	if err != nil {
		return nil, fmt.Errorf("sum the slots assigned: %w", err)
	}
	used := make(map[string]int)
	var (
		host string
		sum  int
	)
	_, err = pgx.ForEachRow(rows, []any{&host, &sum}, func() error {
		used[host] = sum
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sum the slots assigned: %w", err)
	}
	return used, nil
}

// rillResult is one run of the peer: its throughput and the hosts it filled past their slots.
type rillResult struct {
	throughputResult
	overfilledHosts int
}

// rillThroughput inserts cfg.n pending resources and their jobs in one transaction, as Rill
// inserts a resource with its job, then starts the client and times the drain, as River's
// no-op drain is timed: from the database clock read just before the client starts to the
// last resource marked ok. The insert's own time is kept apart.
func rillThroughput(ctx context.Context, cfg config, maxWorkers int) (res rillResult, err error) {
	hosts := rillPool(cfg.n + 1)
	r, err := startRiver(ctx, cfg, maxWorkers, cfg.n, func(workers *river.Workers, pool *pgxpool.Pool) {
		river.AddWorker(workers, newRillWorker(pool, hosts))
	})
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	if _, err := r.pool.Exec(ctx, rillSchema); err != nil {
		return res, fmt.Errorf("create the peer's tables: %w", err)
	}
	inserting := time.Now()
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			INSERT INTO rill_resources (type, name, args, status)
			SELECT 'runtime', 'bench-' || i, '{"slots": 1}', $2 FROM generate_series(1, $1) AS i
			RETURNING id::text`, cfg.n, rillStatusPending)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		params := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			params[i] = river.InsertManyParams{Args: rillArgs{ResourceID: id}}
		}
		_, err = r.client.InsertManyTx(ctx, tx, params)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("insert %d resources and their jobs: %w", cfg.n, err)
	}
	inserted := time.Since(inserting)
	var started time.Time
	if err := r.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&started); err != nil {
		return res, fmt.Errorf("read the database clock before the client starts: %w", err)
	}
	if err := r.start(ctx); err != nil {
		return res, err
	}
	if err := r.waitCompleted(ctx, cfg, cfg.n); err != nil {
		return res, err
	}
	var (
		ok      int
		elapsed float64
	)
	err = r.pool.QueryRow(ctx, `
		SELECT count(*), extract(epoch FROM max(updated_on) - $2)::float8
		  FROM rill_resources WHERE status = $1`, rillStatusOK, started).Scan(&ok, &elapsed)
	if err != nil {
		return res, fmt.Errorf("read the drain's time: %w", err)
	}
	if ok != cfg.n {
		return res, fmt.Errorf("%d of %d resources ok after their jobs completed", ok, cfg.n)
	}
	if res.overfilledHosts, err = rillOverfilled(ctx, r.pool, hosts); err != nil {
		return res, err
	}
	res.throughputResult = throughputResult{
		setting:  fmt.Sprintf("max-workers=%d", maxWorkers),
		parallel: maxWorkers,
		n:        ok,
		elapsed:  time.Duration(elapsed * float64(time.Second)),
		insert:   inserted,
	}
	slog.Info("rill-on-river throughput", "max-workers", maxWorkers, "resources", res.n,
		"elapsed", res.elapsed.Round(time.Millisecond), "overfilled-hosts", res.overfilledHosts)
	return res, nil
}

// rillOverfilled counts the hosts whose assignments exceed their slots.
func rillOverfilled(ctx context.Context, pool *pgxpool.Pool, hosts []rillHost) (int, error) {
	used, err := rillSlotsUsed(ctx, pool)
	if err != nil {
		return 0, err
	}
	count := 0
	for _, h := range hosts {
		if used[h.host] > h.slots {
			count++
		}
	}
	return count, nil
}
