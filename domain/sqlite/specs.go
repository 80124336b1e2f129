package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/berth-dev/berth/domain/internal/backend"
)

// ApplyProvisionerSpec records the provisioner's spec fingerprint and, when it differs from
// the one recorded before (or it was recorded absent), moves the provisioner's resources to a
// new generation. The transaction holds the write lock from its start, so agents that start
// with the same new spec bump once.
func (s *State) ApplyProvisionerSpec(ctx context.Context, provisioner, fingerprint string) (int64, error) {
	if err := backend.CheckSpec(provisioner, fingerprint); err != nil {
		return 0, err
	}
	var bumped int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		inserted, err := tx.ExecContext(ctx, backend.InsertSpecSQL, provisioner, fingerprint)
		if err != nil {
			return err
		}
		first, err := inserted.RowsAffected()
		if err != nil {
			return err
		}
		if first == 1 {
			res, err := tx.ExecContext(ctx, backend.RetryFailedSQL, provisioner)
			if err != nil {
				return err
			}
			bumped, err = res.RowsAffected()
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
		res, err := tx.ExecContext(ctx, backend.BumpProvisionerResourcesSQL, provisioner)
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

// MarkProvisionersAbsent records every provisioner not in present as absent: its fingerprint
// becomes the empty string, which no spec has, so putting it back bumps its resources.
func (s *State) MarkProvisionersAbsent(ctx context.Context, present []string) ([]string, error) {
	if present == nil {
		present = []string{} // JSON null would be one NULL name, which matches nothing
	}
	names, err := json.Marshal(present)
	if err != nil {
		return nil, fmt.Errorf("record the provisioners absent from the set: %w", err)
	}
	var absent []string
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `
			UPDATE provisioner_specs SET fingerprint = '', applied_at = `+nowSQL+`
			 WHERE fingerprint <> '' AND provisioner NOT IN (SELECT value FROM json_each($1))
			RETURNING provisioner`, string(names))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			absent = append(absent, name)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("record the provisioners absent from the set: %w", err)
	}
	slices.Sort(absent)
	return absent, nil
}
