package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// SetQuota applies c and wakes the owner's resources that wait for quota on the
// provisioner, in one transaction. Only the agent's role may write owner_quotas: a client's
// write is refused by the database (42501) and gives ErrForbidden.
func (s *State) SetQuota(ctx context.Context, c domain.QuotaChange) (domain.QuotaUsage, error) {
	if err := domain.CheckQuotaChange(c); err != nil {
		return domain.QuotaUsage{}, err
	}
	var out domain.QuotaUsage
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO owner_quotas (owner, provisioner, max_resources, max_slots) VALUES ($1, $2, $3, $4)
			ON CONFLICT (owner, provisioner) DO UPDATE
			   SET max_resources = CASE WHEN $5 THEN excluded.max_resources ELSE owner_quotas.max_resources END,
			       max_slots = CASE WHEN $6 THEN excluded.max_slots ELSE owner_quotas.max_slots END,
			       updated_at = now()`,
			c.Owner, c.Provisioner, setMax(c.Resources), setMax(c.Slots), c.Resources.Set, c.Slots.Set); err != nil {
			return err
		}
		if err := wakeQuotaWaiters(ctx, tx, c.Owner, c.Provisioner); err != nil {
			return err
		}
		quotas, err := listQuotas(ctx, tx, domain.QuotaFilter{Owner: c.Owner, Provisioner: c.Provisioner})
		if err != nil {
			return err
		}
		out = quotas[0]
		return nil
	})
	if err != nil {
		return domain.QuotaUsage{}, fmt.Errorf("set the quota of owner %q on provisioner %q: %w", c.Owner, c.Provisioner, quotaWriteError(err))
	}
	return out, nil
}

// RemoveQuota removes the quota and wakes the owner's resources waiting for it.
func (s *State) RemoveQuota(ctx context.Context, owner, provisioner string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM owner_quotas WHERE owner = $1 AND provisioner = $2`, owner, provisioner)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("no quota is set: %w", domain.ErrNotFound)
		}
		return wakeQuotaWaiters(ctx, tx, owner, provisioner)
	})
	if err != nil {
		return fmt.Errorf("remove the quota of owner %q on provisioner %q: %w", owner, provisioner, quotaWriteError(err))
	}
	return nil
}

// ListQuotas lists the quotas f matches with their owners' usage.
func (s *State) ListQuotas(ctx context.Context, f domain.QuotaFilter) ([]domain.QuotaUsage, error) {
	out, err := listQuotas(ctx, s.pool, f)
	if err != nil {
		return nil, fmt.Errorf("list quotas: %w", err)
	}
	return out, nil
}

// admitSQL admits resource $1 under the lease ($2, $3) at $5 units on provisioner $4 when
// that needs no quota: the row is admitted there at $5 or more already (lowered to $5 when
// $6 says so), or its owner has no quota on the provisioner. It returns the row's owner,
// whether it was covered, whether a quota exists, its admitted units before, and the units
// written (NULL when it wrote none); no row when the lease is not the row's.
const admitSQL = `
	WITH r AS (
		SELECT owner, admitted_units,
		       coalesce(admitted_provisioner = $4 AND admitted_units >= $5, false) AS covered,
		       EXISTS (SELECT 1 FROM owner_quotas q WHERE q.owner = resources.owner AND q.provisioner = $4) AS quota
		  FROM resources
		 WHERE id = $1 AND lease_holder = $2 AND lease_token = $3 AND lease_expires_at >= now()
	), admitted AS (
		UPDATE resources SET admitted_provisioner = $4, admitted_units = $5
		  FROM r
		 WHERE id = $1 AND lease_holder = $2 AND lease_token = $3 AND lease_expires_at >= now()
		   AND CASE WHEN r.covered THEN $6 AND r.admitted_units > $5 ELSE NOT r.quota AND NOT $7 END
		RETURNING resources.admitted_units
	)
	SELECT r.owner, r.covered, r.quota, r.admitted_units, (SELECT admitted_units FROM admitted) FROM r`

// AdmitResource admits the resource against its owner's quota. The common cases (admitted
// already, or no quota) take one statement and no lock (with a.Defer, no quota writes
// nothing: the attempt's next progress write records the admission); otherwise a transaction locks the
// quota row (SELECT ... FOR UPDATE), which serializes the admissions of the owner on the
// provisioner across agents: each sums the usage the one before it committed.
func (s *State) AdmitResource(ctx context.Context, id string, lease domain.Lease, a domain.Admission) (int64, error) {
	uid, err := parseID(id)
	if err != nil {
		return 0, err
	}
	if err := domain.CheckAdmission(a); err != nil {
		return 0, fmt.Errorf("admit resource %s: %w", id, err)
	}
	var (
		owner          string
		covered, quota bool
		before, wrote  *int64
	)
	err = s.pool.QueryRow(ctx, admitSQL, uid, lease.Holder, lease.Token, a.Provisioner, a.Units, a.Lower, a.Defer).
		Scan(&owner, &covered, &quota, &before, &wrote)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, s.admitLeaseError(ctx, id, uid, lease)
	case err != nil:
		return 0, fmt.Errorf("admit resource %s: %w", id, err)
	case wrote != nil:
		return *wrote, nil
	case covered:
		return *before, nil
	case !quota && a.Defer:
		return 0, domain.ErrAdmissionDeferred
	}
	var admitted int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := domain.Quota{Owner: owner, Provisioner: a.Provisioner}
		err := tx.QueryRow(ctx, `
			SELECT max_resources, max_slots, updated_at FROM owner_quotas
			 WHERE owner = $1 AND provisioner = $2 FOR UPDATE`, owner, a.Provisioner).Scan(&q.MaxResources, &q.MaxSlots, &q.UpdatedAt)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err == nil {
			var resources, slots int64
			if err := tx.QueryRow(ctx, backend.QuotaUsageSQL, owner, a.Provisioner, uid).Scan(&resources, &slots); err != nil {
				return err
			}
			if !q.Admits(resources, slots, a.Units) {
				return &domain.QuotaExceededError{Quota: q, Resources: resources, Slots: slots, Needs: a.Units}
			}
		}
		tag, err := tx.Exec(ctx, `
			UPDATE resources SET admitted_provisioner = $4, admitted_units = $5
			 WHERE id = $1 AND lease_holder = $2 AND lease_token = $3 AND lease_expires_at >= now()`,
			uid, lease.Holder, lease.Token, a.Provisioner, a.Units)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errLeaseLost
		}
		admitted = a.Units
		return nil
	})
	switch {
	case errors.Is(err, errLeaseLost):
		return 0, s.admitLeaseError(ctx, id, uid, lease)
	case err != nil:
		return 0, fmt.Errorf("admit resource %s: %w", id, err)
	}
	return admitted, nil
}

// errLeaseLost ends an admission's transaction whose write the lease no longer allows.
var errLeaseLost = errors.New("lease lost")

// admitLeaseError says why an admission under lease found no row to write.
func (s *State) admitLeaseError(ctx context.Context, id string, uid pgtype.UUID, lease domain.Lease) error {
	l, err := s.readLease(ctx, uid)
	if err != nil {
		return fmt.Errorf("admit resource %s: %w", id, err)
	}
	return fmt.Errorf("admit resource %s: %w", id, l.LostError(lease))
}

// querier is what listQuotas reads with: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func listQuotas(ctx context.Context, q querier, f domain.QuotaFilter) ([]domain.QuotaUsage, error) {
	rows, err := q.Query(ctx, backend.ListQuotasSQL, f.Owner, f.Provisioner)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.QuotaUsage, error) {
		var u domain.QuotaUsage
		err := row.Scan(&u.Owner, &u.Provisioner, &u.MaxResources, &u.MaxSlots, &u.UpdatedAt, &u.Resources, &u.Slots)
		u.UpdatedAt = u.UpdatedAt.UTC()
		return u, err
	})
}

// wakeQuotaWaiters makes the retries of the owner's resources waiting for quota on the
// provisioner due, and logs a change of each so that the agents take them up at once.
func wakeQuotaWaiters(ctx context.Context, tx pgx.Tx, owner, provisioner string) error {
	tag, err := tx.Exec(ctx, `
		WITH woken AS (`+backend.WakeQuotaWaitersSQL+`)
		INSERT INTO change_log (resource_id, owner) SELECT id, $1 FROM woken`, owner, provisioner)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify('berth_resource_changes', '')`)
	return err
}

// setMax is the value a QuotaLimit writes: its maximum when it is set, else NULL.
func setMax(l domain.QuotaLimit) *int64 {
	if !l.Set {
		return nil
	}
	return l.Max
}

// quotaWriteError explains a write of owner_quotas the database refused to a client role.
func quotaWriteError(err error) error {
	var qe *domain.QuotaExceededError
	if errors.As(err, &qe) {
		return err
	}
	err = describeDBError(err)
	if errors.Is(err, domain.ErrForbidden) {
		return fmt.Errorf("only the Berth agent's role (the owner of Berth's tables) writes quotas: run the command with the agent's database URL: %w", domain.ErrForbidden)
	}
	return err
}
