package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// ApplyProvisionerSpec records the provisioner's spec fingerprint and, when it differs from
// the one recorded before (or it was recorded absent), moves the provisioner's resources to
// a new generation. The row lock on provisioner_specs serialises agents that start with the
// same new spec, so only one of them bumps.
func (s *State) ApplyProvisionerSpec(ctx context.Context, provisioner, fingerprint string) (int64, error) {
	if err := backend.CheckSpec(provisioner, fingerprint); err != nil {
		return 0, err
	}
	var bumped int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		inserted, err := tx.Exec(ctx, backend.InsertSpecSQL, provisioner, fingerprint)
		if err != nil {
			return err
		}
		if inserted.RowsAffected() == 1 {
			tag, err := tx.Exec(ctx, backend.RetryFailedSQL, provisioner)
			bumped = tag.RowsAffected()
			return err
		}
		var previous string
		if err := tx.QueryRow(ctx, `
			SELECT fingerprint FROM provisioner_specs WHERE provisioner = $1 FOR UPDATE`,
			provisioner).Scan(&previous); err != nil {
			return err
		}
		if previous == fingerprint {
			return nil
		}
		tag, err := tx.Exec(ctx, backend.BumpProvisionerResourcesSQL, provisioner)
		if err != nil {
			return err
		}
		bumped = tag.RowsAffected()
		_, err = tx.Exec(ctx, `
			UPDATE provisioner_specs SET fingerprint = $2, applied_at = now() WHERE provisioner = $1`,
			provisioner, fingerprint)
		return err
	})
	if err != nil {
		var fe *domain.FieldError
		if errors.As(err, &fe) {
			return 0, err
		}
		return 0, fmt.Errorf("apply the spec of provisioner %q: %w", provisioner, err)
	}
	return bumped, nil
}

// MarkProvisionersAbsent records every provisioner not in present as absent: its fingerprint
// becomes the empty string, which no spec has, so putting it back bumps its resources. One
// statement, so it takes the same row locks ApplyProvisionerSpec does.
func (s *State) MarkProvisionersAbsent(ctx context.Context, present []string) ([]string, error) {
	if present == nil {
		present = []string{} // NULL would match nothing
	}
	rows, err := s.pool.Query(ctx, `
		UPDATE provisioner_specs SET fingerprint = '', applied_at = now()
		 WHERE fingerprint <> '' AND NOT (provisioner = ANY($1::text[]))
		RETURNING provisioner`, present)
	if err != nil {
		return nil, fmt.Errorf("record the provisioners absent from the set: %w", err)
	}
	absent, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("record the provisioners absent from the set: %w", err)
	}
	slices.Sort(absent)
	return absent, nil
}
