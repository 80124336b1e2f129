package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// RecordCapacity stores samples in one batch, in the transaction that checks term.
func (s *State) RecordCapacity(ctx context.Context, term domain.Term, samples []domain.CapacitySample) error {
	if len(samples) == 0 {
		return nil
	}
	if err := backend.CheckCapacitySamples(samples); err != nil {
		return err
	}
	err := s.asLeader(ctx, term, func(tx pgx.Tx) error {
		batch := &pgx.Batch{}
		for _, c := range samples {
			batch.Queue(backend.InsertCapacitySampleSQL,
				c.At, c.Provisioner, c.Host, c.Unit, c.Total, c.Used, c.Down)
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return fmt.Errorf("record capacity samples: %w", err)
	}
	return nil
}

const sampleColumns = `at, provisioner, host, unit, total, used, down`

func scanSample(row pgx.CollectableRow) (domain.CapacitySample, error) {
	var c domain.CapacitySample
	err := row.Scan(&c.At, &c.Provisioner, &c.Host, &c.Unit, &c.Total, &c.Used, &c.Down)
	return c, err
}

// LatestCapacity returns the samples of each provisioner's newest sample time.
func (s *State) LatestCapacity(ctx context.Context) ([]domain.CapacitySample, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+sampleColumns+` FROM capacity_samples c
		 WHERE at = (SELECT max(at) FROM capacity_samples l WHERE l.provisioner = c.provisioner AND l.host = '')
		 ORDER BY provisioner, host`)
	if err != nil {
		return nil, fmt.Errorf("read the latest capacity: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanSample)
	if err != nil {
		return nil, fmt.Errorf("read the latest capacity: %w", err)
	}
	return out, nil
}

// CapacityTrends summarises the samples since since per provisioner and host.
func (s *State) CapacityTrends(ctx context.Context, since time.Time) ([]domain.CapacityTrend, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT provisioner, host, (array_agg(unit ORDER BY at DESC))[1], count(*)::int, min(used), max(used),
		       min(at), (array_agg(total ORDER BY at))[1], (array_agg(used ORDER BY at))[1], (array_agg(down ORDER BY at))[1],
		       max(at), (array_agg(total ORDER BY at DESC))[1], (array_agg(used ORDER BY at DESC))[1], (array_agg(down ORDER BY at DESC))[1]
		  FROM capacity_samples WHERE at >= $1
		 GROUP BY provisioner, host
		 ORDER BY provisioner, host`, since)
	if err != nil {
		return nil, fmt.Errorf("read the capacity trend: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.CapacityTrend, error) {
		var t domain.CapacityTrend
		err := row.Scan(&t.Provisioner, &t.Host, &t.Unit, &t.Samples, &t.MinUsed, &t.MaxUsed,
			&t.Oldest.At, &t.Oldest.Total, &t.Oldest.Used, &t.Oldest.Down,
			&t.Newest.At, &t.Newest.Total, &t.Newest.Used, &t.Newest.Down)
		for _, c := range []*domain.CapacitySample{&t.Oldest, &t.Newest} {
			c.Provisioner, c.Host, c.Unit = t.Provisioner, t.Host, t.Unit
		}
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the capacity trend: %w", err)
	}
	return out, nil
}

// PruneCapacitySamples deletes samples from before cutoff.
func (s *State) PruneCapacitySamples(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	return s.prune(ctx, term, backend.PrunableCapacitySamples, olderThan)
}

// SetCapacityWarning upserts w under a row lock, in the transaction that checks term; the
// row's since moves only when active flips, so agents sharing the database agree on one
// crossing.
func (s *State) SetCapacityWarning(ctx context.Context, term domain.Term, w domain.CapacityWarning) (bool, error) {
	if err := backend.CheckCapacityWarning(w); err != nil {
		return false, err
	}
	var changed bool
	err := s.asLeader(ctx, term, func(tx pgx.Tx) error {
		var previous bool
		err := tx.QueryRow(ctx, `
			SELECT active FROM capacity_warnings WHERE provisioner = $1 AND kind = $2 FOR UPDATE`,
			w.Provisioner, w.Kind).Scan(&previous)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		changed = previous != w.Active
		_, err = tx.Exec(ctx, `
			INSERT INTO capacity_warnings (provisioner, kind, active, message, since)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (provisioner, kind) DO UPDATE
			   SET active = EXCLUDED.active,
			       message = EXCLUDED.message,
			       since = CASE WHEN capacity_warnings.active = EXCLUDED.active THEN capacity_warnings.since ELSE EXCLUDED.since END,
			       updated_at = now()`,
			w.Provisioner, w.Kind, w.Active, w.Message, w.Since)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record capacity warning %s of %s: %w", w.Kind, w.Provisioner, err)
	}
	return changed, nil
}

// ListCapacityWarnings returns every warning's state.
func (s *State) ListCapacityWarnings(ctx context.Context) ([]domain.CapacityWarning, error) {
	rows, err := s.pool.Query(ctx, backend.ListCapacityWarningsSQL)
	if err != nil {
		return nil, fmt.Errorf("list capacity warnings: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.CapacityWarning, error) {
		var w domain.CapacityWarning
		err := row.Scan(&w.Provisioner, &w.Kind, &w.Active, &w.Message, &w.Since)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list capacity warnings: %w", err)
	}
	return out, nil
}
