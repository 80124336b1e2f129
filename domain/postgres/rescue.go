package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// ForgetResource removes the row without deprovisioning it, in one transaction that locks
// the row, refuses while a live agent holds its lease, records who forgot it and removes it
// as FinalizeDelete does (berth.finalizing). Only the tables' owner's role may: the client
// contract (migration 0012) keeps the finalizing DELETE the agent's, and the role is
// checked first so that a client is told so rather than refused a write of the history.
func (s *State) ForgetResource(ctx context.Context, id string, f domain.Forgetting) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	var r domain.Resource
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			role  string
			agent bool
		)
		if err := tx.QueryRow(ctx, `
			SELECT current_user, `+actsAsAgentSQL).Scan(&role, &agent); err != nil {
			return err
		}
		if !agent {
			return fmt.Errorf("role %s is a client, and only the Berth agent's role (the owner of Berth's tables) removes a resource without deprovisioning it: run the command as that role, or request the delete without --force: %w", role, domain.ErrForbidden)
		}
		l, err := scanLease(tx.QueryRow(ctx, `SELECT `+leaseColumns+` `+leaseFrom+` FOR UPDATE OF r`, uid), uid)
		if err != nil {
			return err
		}
		if l.Live && l.Holder != "" {
			return backend.ForgetHeldError(id, l)
		}
		if r, err = scanResource(tx.QueryRow(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = $1`, uid)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO resource_events (resource_id, kind, status, message) VALUES ($1, $2, $3, $4)`,
			uid, string(domain.EventControl), string(r.Status), domain.ForgetMessage(r, f, role)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL berth.finalizing = 'on'`); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM resources WHERE id = $1`, uid)
		return err
	})
	var held *domain.LeaseHeldError
	switch {
	case errors.Is(err, domain.ErrNotFound), errors.As(err, &held), errors.Is(err, domain.ErrForbidden):
		return domain.Resource{}, err
	case err != nil:
		return domain.Resource{}, fmt.Errorf("forget resource %s: %w", id, describeDBError(err))
	}
	return r, nil
}

// SetProvisioner moves the resource to provisioner when the rule of the
// resources_provisioner_fixed trigger allows it (backend.ProvisionerChangeError), which
// the UPDATE repeats so that the write and the decision see the same row; the trigger then
// clears the retry bookkeeping and logs the change.
func (s *State) SetProvisioner(ctx context.Context, id, provisioner string) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	r, err := scanResource(s.pool.QueryRow(ctx, `
		UPDATE resources SET provisioner = $2
		 WHERE id = $1 AND provisioner <> $2 AND status <> 'deleting'
		   AND (provisioner = '' OR (status IN ('pending', 'error') AND observed_generation = 0 AND state = '{}'::jsonb))
		RETURNING `+resourceColumns, uid, provisioner))
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return r, nil
	case errors.As(err, &pgErr) && pgErr.ConstraintName == "resources_provisioner_fixed":
		// The row moved on between the UPDATE's read and its trigger's: say why from the row.
	case !errors.Is(err, pgx.ErrNoRows):
		return domain.Resource{}, fmt.Errorf("set provisioner of resource %s: %w", id, describeDBError(err))
	}
	cur, err := s.GetResource(ctx, id)
	if err != nil {
		return domain.Resource{}, err
	}
	if err := backend.ProvisionerChangeError(cur, provisioner); err != nil || cur.Provisioner == provisioner {
		return cur, err
	}
	return domain.Resource{}, fmt.Errorf("set provisioner of resource %s: the resource changed under the write; try again: %w", id, domain.ErrConflict)
}
