package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
)

// RecordBrokerFailure counts f on provisioner's breaker, in a transaction that holds the
// breaker's row.
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

// TakeBrokerProbe gives holder the probe of provisioner's breaker when it is due; the row
// lock makes one of the agents asking at once get it.
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
	rows, err := s.pool.Query(ctx, `SELECT `+breakerColumns+`, now() FROM broker_breakers ORDER BY provisioner`)
	if err != nil {
		return nil, fmt.Errorf("list broker breakers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Breaker, error) { return scanBreaker(row) })
	if err != nil {
		return nil, fmt.Errorf("list broker breakers: %w", err)
	}
	return out, nil
}

const breakerColumns = `provisioner, state, failures, window_started_at, opened_at, next_probe_at,
	probe_holder, probe_until, last_error, open_count, updated_at`

func scanBreaker(row pgx.Row) (domain.Breaker, error) {
	var b domain.Breaker
	var windowStarted, opened, nextProbe, probeUntil *time.Time
	err := row.Scan(&b.Provisioner, &b.State, &b.Failures, &windowStarted, &opened, &nextProbe,
		&b.ProbeHolder, &probeUntil, &b.LastError, &b.OpenCount, &b.UpdatedAt, &b.Now)
	b.WindowStartedAt, b.OpenedAt, b.NextProbeAt, b.ProbeUntil = orZero(windowStarted), orZero(opened), orZero(nextProbe), orZero(probeUntil)
	return b, err
}

// changeBreaker reads provisioner's breaker (a closed one when it has no row) holding its
// row, and writes what change makes of it when change says it changed.
func (s *State) changeBreaker(ctx context.Context, provisioner string, change func(domain.Breaker) (domain.Breaker, bool)) (domain.Breaker, error) {
	if provisioner == "" {
		return domain.Breaker{}, &domain.FieldError{Field: "provisioner", Msg: "must not be empty"}
	}
	var out domain.Breaker
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO broker_breakers (provisioner) VALUES ($1) ON CONFLICT DO NOTHING`, provisioner); err != nil {
			return err
		}
		b, err := scanBreaker(tx.QueryRow(ctx, `SELECT `+breakerColumns+`, now() FROM broker_breakers WHERE provisioner = $1 FOR UPDATE`, provisioner))
		if err != nil {
			return err
		}
		b, changed := change(b)
		out = b
		if !changed {
			return nil
		}
		return tx.QueryRow(ctx, `
			UPDATE broker_breakers
			   SET state = $2, failures = $3, window_started_at = $4, opened_at = $5, next_probe_at = $6,
			       probe_holder = $7, probe_until = $8, last_error = $9, open_count = $10, updated_at = now()
			 WHERE provisioner = $1
			RETURNING updated_at`, provisioner, b.State, b.Failures, orNull(b.WindowStartedAt), orNull(b.OpenedAt),
			orNull(b.NextProbeAt), b.ProbeHolder, orNull(b.ProbeUntil), b.LastError, b.OpenCount).Scan(&out.UpdatedAt)
	})
	return out, err
}

// orZero is *t, or the zero time for nil.
func orZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// orNull is t, or nil (NULL) for the zero time.
func orNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
