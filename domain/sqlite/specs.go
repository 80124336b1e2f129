package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/berth-dev/berth/domain"
)

// ApplyProvisionerSpec records the provisioner's spec fingerprint and, when it differs from
// the one recorded before, moves the provisioner's resources to a new generation. The
// transaction holds the write lock from its start, so agents that start with the same new
// spec bump once.
func (s *State) ApplyProvisionerSpec(ctx context.Context, provisioner, fingerprint string) (int64, error) {
	switch {
	case provisioner == "":
		return 0, &domain.FieldError{Field: "provisioner", Msg: "is required"}
	case fingerprint == "":
		return 0, &domain.FieldError{Field: "fingerprint", Msg: "is required"}
	}
	var bumped int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO provisioner_specs (provisioner, fingerprint) VALUES ($1, $2)
			ON CONFLICT (provisioner) DO NOTHING`, provisioner, fingerprint); err != nil {
			return err
		}
		var previous string
		if err := tx.QueryRowContext(ctx, `SELECT fingerprint FROM provisioner_specs WHERE provisioner = $1`,
			provisioner).Scan(&previous); err != nil {
			return err
		}
		if previous == fingerprint {
			return nil
		}
		res, err := tx.ExecContext(ctx, `
			UPDATE resources
			   SET generation = generation + 1, attempts = 0, next_attempt_at = NULL, last_error = ''
			 WHERE provisioner = $1 AND status <> 'deleting'`, provisioner)
		if err != nil {
			return err
		}
		if bumped, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			UPDATE provisioner_specs SET fingerprint = $2, applied_at = `+nowSQL+` WHERE provisioner = $1`,
			provisioner, fingerprint)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("apply the spec of provisioner %q: %w", provisioner, err)
	}
	return bumped, nil
}
