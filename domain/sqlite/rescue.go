package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// ForgetResource removes the row without deprovisioning it, in one transaction under the
// write lock that refuses while a live agent holds its lease, records who forgot it and
// removes it as FinalizeDelete does (the 'finalize' write intent). SQLite has no roles: whoever
// may write the file may forget.
func (s *State) ForgetResource(ctx context.Context, id string, f domain.Forgetting) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	var r domain.Resource
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		l, err := readLease(ctx, tx, uid)
		if err != nil {
			return err
		}
		if l.Live && l.Holder != "" {
			return backend.ForgetHeldError(id, l)
		}
		if r, err = readResource(ctx, tx, uid); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO resource_events (resource_id, kind, status, message) VALUES ($1, $2, $3, $4)`,
			uid, string(domain.EventControl), string(r.Status), domain.ForgetMessage(r, f, "")); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO write_intents (resource_id, intent) VALUES ($1, 'finalize')
			ON CONFLICT DO NOTHING`, uid); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM resources WHERE id = $1`, uid)
		return err
	})
	var held *domain.LeaseHeldError
	switch {
	case errors.Is(err, domain.ErrNotFound), errors.As(err, &held):
		return domain.Resource{}, err
	case err != nil:
		return domain.Resource{}, fmt.Errorf("forget resource %s: %w", id, err)
	}
	return r, nil
}

// SetProvisioner moves the resource to provisioner when backend.ProvisionerChangeError
// allows it, decided on the row read under the write lock; the trigger then clears the
// retry bookkeeping and logs the change.
func (s *State) SetProvisioner(ctx context.Context, id, provisioner string) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	var r domain.Resource
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := readResource(ctx, tx, uid)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return err
		}
		if err := backend.ProvisionerChangeError(cur, provisioner); err != nil || cur.Provisioner == provisioner {
			r = cur
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE resources SET provisioner = $2 WHERE id = $1`, uid, provisioner); err != nil {
			return err
		}
		r, err = readResource(ctx, tx, uid)
		return err
	})
	switch {
	case errors.Is(err, domain.ErrNotFound), errors.Is(err, domain.ErrConflict):
		return domain.Resource{}, err
	case err != nil:
		return domain.Resource{}, fmt.Errorf("set provisioner of resource %s: %w", id, err)
	}
	return r, nil
}
