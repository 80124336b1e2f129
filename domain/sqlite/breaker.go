package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
)

// RecordBrokerFailure counts f on provisioner's breaker, in one write transaction.
func (s *State) RecordBrokerFailure(ctx context.Context, provisioner string, f domain.BrokerFailure) (domain.Breaker, error) {
	if err := domain.CheckBrokerFailure(f); err != nil {
		return domain.Breaker{}, err
	}
	b, err := s.changeBreaker(ctx, provisioner, func(b domain.Breaker) (domain.Breaker, bool) {
		return b.Failed(b.Now, f), true
	})
	if err != nil {
		return b, fmt.Errorf("record a failure of provisioner %q's broker: %w", provisioner, err)
	}
	return b, nil
}

// RecordBrokerSuccess closes provisioner's half-open breaker. A closed or open one is only
// read.
func (s *State) RecordBrokerSuccess(ctx context.Context, provisioner string) (domain.Breaker, error) {
	b, err := s.changeBreaker(ctx, provisioner, func(b domain.Breaker) (domain.Breaker, bool) {
		return b.Succeeded(), b.State == domain.BreakerHalfOpen
	})
	if err != nil {
		return b, fmt.Errorf("record a success of provisioner %q's broker: %w", provisioner, err)
	}
	return b, nil
}

// TakeBrokerProbe gives holder the probe of provisioner's breaker when it is due; writes
// take turns on the file, so of the callers asking at once one gets it.
func (s *State) TakeBrokerProbe(ctx context.Context, provisioner, holder string, lease time.Duration) (domain.Breaker, bool, error) {
	if holder == "" || lease <= 0 {
		return domain.Breaker{}, false, errors.New("take a broker probe: needs a holder and a positive lease")
	}
	var ok bool
	b, err := s.changeBreaker(ctx, provisioner, func(b domain.Breaker) (domain.Breaker, bool) {
		b, ok = b.Probe(b.Now, holder, lease)
		return b, ok
	})
	if err != nil {
		return b, false, fmt.Errorf("take the probe of provisioner %q's broker: %w", provisioner, err)
	}
	return b, ok, nil
}

// ListBreakers returns every breaker that has a row.
func (s *State) ListBreakers(ctx context.Context) ([]domain.Breaker, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+breakerColumns+`, `+nowSQL+` FROM broker_breakers ORDER BY provisioner`)
	if err != nil {
		return nil, fmt.Errorf("list broker breakers: %w", err)
	}
	out, err := collectRows(rows, scanBreaker)
	if err != nil {
		return nil, fmt.Errorf("list broker breakers: %w", err)
	}
	return out, nil
}

const breakerColumns = `provisioner, state, failures, window_started_at, opened_at, next_probe_at,
	probe_holder, probe_until, last_error, open_count, updated_at`

func scanBreaker(row rowScanner) (domain.Breaker, error) {
	var b domain.Breaker
	var windowStarted, opened, nextProbe, probeUntil sql.NullString
	var updated, now string
	if err := row.Scan(&b.Provisioner, &b.State, &b.Failures, &windowStarted, &opened, &nextProbe,
		&b.ProbeHolder, &probeUntil, &b.LastError, &b.OpenCount, &updated, &now); err != nil {
		return b, err
	}
	var err error
	for _, t := range []struct {
		column string
		s      sql.NullString
		to     *time.Time
	}{
		{"window_started_at", windowStarted, &b.WindowStartedAt}, {"opened_at", opened, &b.OpenedAt},
		{"next_probe_at", nextProbe, &b.NextProbeAt}, {"probe_until", probeUntil, &b.ProbeUntil},
		{"updated_at", sql.NullString{String: updated, Valid: true}, &b.UpdatedAt},
		{"now", sql.NullString{String: now, Valid: true}, &b.Now},
	} {
		if !t.s.Valid {
			continue
		}
		if *t.to, err = parseTime(t.column, t.s.String); err != nil {
			return b, err
		}
	}
	return b, nil
}

// changeBreaker reads provisioner's breaker (a closed one when it has no row) in a write
// transaction, and writes what change makes of it when change says it changed.
func (s *State) changeBreaker(ctx context.Context, provisioner string, change func(domain.Breaker) (domain.Breaker, bool)) (domain.Breaker, error) {
	if provisioner == "" {
		return domain.Breaker{}, &domain.FieldError{Field: "provisioner", Msg: "must not be empty"}
	}
	var out domain.Breaker
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO broker_breakers (provisioner) VALUES ($1) ON CONFLICT DO NOTHING`, provisioner); err != nil {
			return err
		}
		b, err := scanBreaker(tx.QueryRowContext(ctx, `SELECT `+breakerColumns+`, `+nowSQL+` FROM broker_breakers WHERE provisioner = $1`, provisioner))
		if err != nil {
			return err
		}
		b, changed := change(b)
		out = b
		if !changed {
			return nil
		}
		out.UpdatedAt = b.Now
		_, err = tx.ExecContext(ctx, `
			UPDATE broker_breakers
			   SET state = $2, failures = $3, window_started_at = $4, opened_at = $5, next_probe_at = $6,
			       probe_holder = $7, probe_until = $8, last_error = $9, open_count = $10, updated_at = $11
			 WHERE provisioner = $1`, provisioner, string(b.State), b.Failures, nullTime(b.WindowStartedAt), nullTime(b.OpenedAt),
			nullTime(b.NextProbeAt), b.ProbeHolder, nullTime(b.ProbeUntil), b.LastError, b.OpenCount, FormatTime(b.Now))
		return err
	})
	return out, err
}

// nullTime is t in the stored form, or NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return FormatTime(t)
}
