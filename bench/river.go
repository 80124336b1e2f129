package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's fetch tuning for the bench: a short cooldown and poll so that neither holds a job
// back at low load; inserts also wake the client through LISTEN/NOTIFY.
const (
	riverFetchCooldown     = time.Millisecond
	riverFetchPollInterval = 50 * time.Millisecond
)

// noopArgs is the bench's job: it does nothing, so only River's own overhead is measured.
type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverRun is one River measurement: a fresh database with River's schema and a client.
type riverRun struct {
	db        *database
	pool      *pgxpool.Pool
	client    *river.Client[pgx.Tx]
	completed <-chan *river.Event
	started   bool
}

// addNoop registers the no-op job's worker.
func addNoop(workers *river.Workers, _ *pgxpool.Pool) { river.AddWorker(workers, &noopWorker{}) }

// startRiver prepares a migrated database and a (not yet started) client whose default
// queue runs maxWorkers of the workers addWorkers registers (given the run's pool) and
// whose completion channel holds expected events. The caller must close the run.
func startRiver(ctx context.Context, cfg config, maxWorkers, expected int, addWorkers func(*river.Workers, *pgxpool.Pool)) (*riverRun, error) {
	db, err := createDatabase(ctx, cfg.server)
	if err != nil {
		return nil, err
	}
	r := &riverRun{db: db}
	if err := r.prepare(ctx, maxWorkers, expected, addWorkers); err != nil {
		return nil, errors.Join(err, r.close())
	}
	return r, nil
}

func (r *riverRun) prepare(ctx context.Context, maxWorkers, expected int, addWorkers func(*river.Workers, *pgxpool.Pool)) error {
	pool, err := pgxpool.New(ctx, r.db.url)
	if err != nil {
		return fmt.Errorf("connect to the bench database: %w", err)
	}
	r.pool = pool
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate River's schema: %w", err)
	}
	workers := river.NewWorkers()
	addWorkers(workers, pool)
	r.client, err = river.NewClient(driver, &river.Config{
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return fmt.Errorf("create the River client: %w", err)
	}
	r.completed, _ = r.client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: expected,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	return nil
}

func (r *riverRun) start(ctx context.Context) error {
	if err := r.client.Start(ctx); err != nil {
		return fmt.Errorf("start the River client: %w", err)
	}
	r.started = true
	return nil
}

// close stops the client, then drops the database.
func (r *riverRun) close() error {
	var err error
	if r.started {
		ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
		defer cancel()
		err = r.client.Stop(ctx)
	}
	if r.pool != nil {
		r.pool.Close()
	}
	r.db.drop()
	return err
}

// waitCompleted waits for n completion events.
func (r *riverRun) waitCompleted(ctx context.Context, cfg config, n int) error {
	timeout := time.NewTimer(cfg.waitTimeout)
	defer timeout.Stop()
	for done := 0; done < n; done++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("%d of %d River jobs completed after %s", done, n, cfg.waitTimeout)
		case <-r.completed:
		}
	}
	return nil
}

// riverThroughput inserts cfg.n jobs, then starts the client and times the drain.
func riverThroughput(ctx context.Context, cfg config, maxWorkers int) (res throughputResult, err error) {
	r, err := startRiver(ctx, cfg, maxWorkers, cfg.n, addNoop)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	params := make([]river.InsertManyParams, cfg.n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	inserting := time.Now()
	if _, err := r.client.InsertMany(ctx, params); err != nil {
		return res, fmt.Errorf("insert %d River jobs: %w", cfg.n, err)
	}
	began := time.Now()
	if err := r.start(ctx); err != nil {
		return res, err
	}
	if err := r.waitCompleted(ctx, cfg, cfg.n); err != nil {
		return res, err
	}
	res = throughputResult{
		setting:  fmt.Sprintf("max-workers=%d", maxWorkers),
		parallel: maxWorkers,
		n:        cfg.n,
		elapsed:  time.Since(began),
		insert:   began.Sub(inserting),
	}
	slog.Info("river throughput", "max-workers", maxWorkers, "jobs", res.n, "elapsed", res.elapsed.Round(time.Millisecond))
	return res, nil
}

// riverLatency inserts cfg.latencyN jobs one at a time at cfg.rate, after a warm-up job,
// and returns each one's attempted_at - created_at.
func riverLatency(ctx context.Context, cfg config, maxWorkers int) (lat []time.Duration, err error) {
	r, err := startRiver(ctx, cfg, maxWorkers, cfg.latencyN+1, addNoop)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := r.close(); err == nil {
			err = cerr
		}
	}()
	warmup, err := r.startWarm(ctx, cfg)
	if err != nil {
		return nil, err
	}
	err = paced(ctx, cfg.latencyN, cfg.rate, func(ctx context.Context, _ int) error {
		_, err := r.client.Insert(ctx, noopArgs{}, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert latency jobs: %w", err)
	}
	if err := r.waitCompleted(ctx, cfg, cfg.latencyN); err != nil {
		return nil, err
	}
	timed, err := r.timedLatencies(ctx, warmup)
	return latenciesOf(timed), err
}

// startWarm starts the client and waits for a warm-up job, so that its start-up is not
// measured, and returns that job's id.
func (r *riverRun) startWarm(ctx context.Context, cfg config) (int64, error) {
	if err := r.start(ctx); err != nil {
		return 0, err
	}
	warmup, err := r.client.Insert(ctx, noopArgs{}, nil)
	if err != nil {
		return 0, fmt.Errorf("insert the warm-up job: %w", err)
	}
	return warmup.Job.ID, r.waitCompleted(ctx, cfg, 1)
}

// timedLatencies returns created_at and attempted_at - created_at of every job but the
// warm-up job.
func (r *riverRun) timedLatencies(ctx context.Context, warmup int64) ([]timedLatency, error) {
	return timedDurations(ctx, r.pool, `
		SELECT created_at, extract(epoch FROM attempted_at - created_at)::float8
		  FROM river_job WHERE id <> $1`, warmup)
}
