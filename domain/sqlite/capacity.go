package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// RecordCapacity stores samples in one transaction.
func (s *State) RecordCapacity(ctx context.Context, term domain.Term, samples []domain.CapacitySample) error {
	if len(samples) == 0 {
		return nil
	}
	if err := backend.CheckCapacitySamples(samples); err != nil {
		return err
	}
	err := s.asLeader(ctx, term, func(tx *sql.Tx) error {
		for _, c := range samples {
			if _, err := tx.ExecContext(ctx, backend.InsertCapacitySampleSQL,
				FormatTime(c.At), c.Provisioner, c.Host, c.Unit, c.Total, c.Used, c.Down); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record capacity samples: %w", err)
	}
	return nil
}

// LatestCapacity returns the samples of each provisioner's newest sample time.
func (s *State) LatestCapacity(ctx context.Context) ([]domain.CapacitySample, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT at, provisioner, host, unit, total, used, down FROM capacity_samples c
		 WHERE at = (SELECT max(at) FROM capacity_samples l WHERE l.provisioner = c.provisioner AND l.host = '')
		 ORDER BY provisioner, host`)
	if err != nil {
		return nil, fmt.Errorf("read the latest capacity: %w", err)
	}
	out, err := collectRows(rows, func(row rowScanner) (c domain.CapacitySample, err error) {
		var at string
		if err := row.Scan(&at, &c.Provisioner, &c.Host, &c.Unit, &c.Total, &c.Used, &c.Down); err != nil {
			return c, err
		}
		c.At, err = parseTime("at", at)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the latest capacity: %w", err)
	}
	return out, nil
}

// CapacityTrends summarises the samples since since per provisioner and host. A provisioner
// and host has one sample per time, so its oldest and newest are found by their times.
func (s *State) CapacityTrends(ctx context.Context, since time.Time) ([]domain.CapacityTrend, error) {
	rows, err := s.read.QueryContext(ctx, `
		WITH summary AS (
			SELECT provisioner, host, count(*) AS samples, min(used) AS min_used, max(used) AS max_used,
			       min(at) AS oldest, max(at) AS newest
			  FROM capacity_samples WHERE at >= $1
			 GROUP BY provisioner, host)
		SELECT g.provisioner, g.host, n.unit, g.samples, g.min_used, g.max_used,
		       o.at, o.total, o.used, o.down, n.at, n.total, n.used, n.down
		  FROM summary g
		  JOIN capacity_samples o ON o.provisioner = g.provisioner AND o.host = g.host AND o.at = g.oldest
		  JOIN capacity_samples n ON n.provisioner = g.provisioner AND n.host = g.host AND n.at = g.newest
		 ORDER BY g.provisioner, g.host`, FormatTime(since))
	if err != nil {
		return nil, fmt.Errorf("read the capacity trend: %w", err)
	}
	out, err := collectRows(rows, func(row rowScanner) (t domain.CapacityTrend, err error) {
		var oldest, newest string
		if err := row.Scan(&t.Provisioner, &t.Host, &t.Unit, &t.Samples, &t.MinUsed, &t.MaxUsed,
			&oldest, &t.Oldest.Total, &t.Oldest.Used, &t.Oldest.Down,
			&newest, &t.Newest.Total, &t.Newest.Used, &t.Newest.Down); err != nil {
			return t, err
		}
		if t.Oldest.At, err = parseTime("at", oldest); err != nil {
			return t, err
		}
		if t.Newest.At, err = parseTime("at", newest); err != nil {
			return t, err
		}
		for _, c := range []*domain.CapacitySample{&t.Oldest, &t.Newest} {
			c.Provisioner, c.Host, c.Unit = t.Provisioner, t.Host, t.Unit
		}
		return t, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the capacity trend: %w", err)
	}
	return out, nil
}

// PruneCapacitySamples deletes, while term holds, the samples taken more than olderThan ago.
func (s *State) PruneCapacitySamples(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	return s.prune(ctx, term, backend.PrunableCapacitySamples, olderThan)
}

// SetCapacityWarning upserts w; the row's since moves only when active flips. The write
// lock taken at the transaction's start makes the read and the upsert one step.
func (s *State) SetCapacityWarning(ctx context.Context, term domain.Term, w domain.CapacityWarning) (bool, error) {
	if err := backend.CheckCapacityWarning(w); err != nil {
		return false, err
	}
	var changed bool
	err := s.asLeader(ctx, term, func(tx *sql.Tx) error {
		var previous bool
		err := tx.QueryRowContext(ctx, `
			SELECT active FROM capacity_warnings WHERE provisioner = $1 AND kind = $2`,
			w.Provisioner, w.Kind).Scan(&previous)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		changed = previous != w.Active
		_, err = tx.ExecContext(ctx, `
			INSERT INTO capacity_warnings (provisioner, kind, active, message, since)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (provisioner, kind) DO UPDATE
			   SET active = excluded.active,
			       message = excluded.message,
			       since = CASE WHEN capacity_warnings.active = excluded.active THEN capacity_warnings.since ELSE excluded.since END,
			       updated_at = `+nowSQL,
			w.Provisioner, w.Kind, w.Active, w.Message, FormatTime(w.Since))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record capacity warning %s of %s: %w", w.Kind, w.Provisioner, err)
	}
	return changed, nil
}

// ListCapacityWarnings returns every warning's state.
func (s *State) ListCapacityWarnings(ctx context.Context) ([]domain.CapacityWarning, error) {
	rows, err := s.read.QueryContext(ctx, backend.ListCapacityWarningsSQL)
	if err != nil {
		return nil, fmt.Errorf("list capacity warnings: %w", err)
	}
	out, err := collectRows(rows, func(row rowScanner) (w domain.CapacityWarning, err error) {
		var since string
		if err := row.Scan(&w.Provisioner, &w.Kind, &w.Active, &w.Message, &since); err != nil {
			return w, err
		}
		w.Since, err = parseTime("since", since)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list capacity warnings: %w", err)
	}
	return out, nil
}
