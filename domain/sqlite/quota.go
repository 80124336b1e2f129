package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// SetQuota applies c and wakes the owner's resources that wait for quota on the
// provisioner, in one transaction.
func (s *State) SetQuota(ctx context.Context, c domain.QuotaChange) (domain.QuotaUsage, error) {
	if err := domain.CheckQuotaChange(c); err != nil {
		return domain.QuotaUsage{}, err
	}
	var out domain.QuotaUsage
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO owner_quotas (owner, provisioner, max_resources, max_slots) VALUES ($1, $2, $3, $4)
			ON CONFLICT (owner, provisioner) DO UPDATE
			   SET max_resources = CASE WHEN $5 THEN excluded.max_resources ELSE owner_quotas.max_resources END,
			       max_slots = CASE WHEN $6 THEN excluded.max_slots ELSE owner_quotas.max_slots END,
			       updated_at = `+nowSQL,
			c.Owner, c.Provisioner, setMax(c.Resources), setMax(c.Slots), c.Resources.Set, c.Slots.Set); err != nil {
			return describeDBError(err)
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
		return domain.QuotaUsage{}, fmt.Errorf("set the quota of owner %q on provisioner %q: %w", c.Owner, c.Provisioner, err)
	}
	return out, nil
}

// RemoveQuota removes the quota and wakes the owner's resources waiting for it.
func (s *State) RemoveQuota(ctx context.Context, owner, provisioner string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM owner_quotas WHERE owner = $1 AND provisioner = $2`, owner, provisioner)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = fmt.Errorf("no quota is set: %w", domain.ErrNotFound)
			}
			return err
		}
		return wakeQuotaWaiters(ctx, tx, owner, provisioner)
	})
	if err != nil {
		return fmt.Errorf("remove the quota of owner %q on provisioner %q: %w", owner, provisioner, err)
	}
	return nil
}

// ListQuotas lists the quotas f matches with their owners' usage.
func (s *State) ListQuotas(ctx context.Context, f domain.QuotaFilter) ([]domain.QuotaUsage, error) {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list quotas: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	out, err := listQuotas(ctx, tx, f)
	if err != nil {
		return nil, fmt.Errorf("list quotas: %w", err)
	}
	return out, nil
}

// AdmitResource admits the resource against its owner's quota. The transaction holds the
// database's write lock from its start, so the admissions of every agent sharing the file
// are serialized: each sums the usage the one before it committed.
func (s *State) AdmitResource(ctx context.Context, id string, lease domain.Lease, a domain.Admission) (int64, error) {
	uid, err := parseID(id)
	if err != nil {
		return 0, err
	}
	if err := domain.CheckAdmission(a); err != nil {
		return 0, fmt.Errorf("admit resource %s: %w", id, err)
	}
	if a.Defer {
		// An owner without a quota here is admitted by the attempt's next progress write:
		// a read, not a write of its own, on a store that commits one write at a time.
		var deferred bool
		err := s.read.QueryRowContext(ctx, `
			SELECT NOT coalesce(admitted_provisioner = $2 AND admitted_units >= $3, 0)
			       AND NOT EXISTS (SELECT 1 FROM owner_quotas q WHERE q.owner = resources.owner AND q.provisioner = $2)
			  FROM resources WHERE id = $1`, uid, a.Provisioner, a.Units).Scan(&deferred)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return 0, notFound(uid)
		case err != nil:
			return 0, fmt.Errorf("admit resource %s: %w", id, err)
		case deferred:
			return 0, domain.ErrAdmissionDeferred
		}
	}
	var admitted int64
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var (
			owner    string
			prov     sql.NullString
			units    sql.NullInt64
			leaseNow bool
		)
		err := tx.QueryRowContext(ctx, `
			SELECT owner, admitted_provisioner, admitted_units,
			       coalesce(lease_holder = $2 AND lease_token = $3 AND lease_expires_at >= `+nowSQL+`, 0)
			  FROM resources WHERE id = $1`, uid, lease.Holder, lease.Token).Scan(&owner, &prov, &units, &leaseNow)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(uid)
		}
		if err != nil {
			return err
		}
		if !leaseNow {
			l, err := readLease(ctx, tx, uid)
			if err != nil {
				return err
			}
			return l.LostError(lease)
		}
		covered := prov.Valid && prov.String == a.Provisioner && units.Valid && units.Int64 >= a.Units
		if covered && !(a.Lower && units.Int64 > a.Units) {
			admitted = units.Int64
			return nil
		}
		if !covered {
			q := domain.Quota{Owner: owner, Provisioner: a.Provisioner}
			var updatedAt string
			err := tx.QueryRowContext(ctx, `
				SELECT max_resources, max_slots, updated_at FROM owner_quotas WHERE owner = $1 AND provisioner = $2`,
				owner, a.Provisioner).Scan(&q.MaxResources, &q.MaxSlots, &updatedAt)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if err == nil {
				if q.UpdatedAt, err = parseTime("updated_at", updatedAt); err != nil {
					return err
				}
				var resources, slots int64
				if err := tx.QueryRowContext(ctx, backend.QuotaUsageSQL, owner, a.Provisioner, uid).Scan(&resources, &slots); err != nil {
					return err
				}
				if !q.Admits(resources, slots, a.Units) {
					return &domain.QuotaExceededError{Quota: q, Resources: resources, Slots: slots, Needs: a.Units}
				}
			}
		}
		if _, err := tx.ExecContext(ctx, `
			UPDATE resources SET admitted_provisioner = $2, admitted_units = $3 WHERE id = $1`,
			uid, a.Provisioner, a.Units); err != nil {
			return err
		}
		admitted = a.Units
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("admit resource %s: %w", id, err)
	}
	return admitted, nil
}

func listQuotas(ctx context.Context, tx *sql.Tx, f domain.QuotaFilter) ([]domain.QuotaUsage, error) {
	rows, err := tx.QueryContext(ctx, backend.ListQuotasSQL, f.Owner, f.Provisioner)
	if err != nil {
		return nil, err
	}
	return collectRows(rows, func(row rowScanner) (u domain.QuotaUsage, err error) {
		var updatedAt string
		if err := row.Scan(&u.Owner, &u.Provisioner, &u.MaxResources, &u.MaxSlots, &updatedAt, &u.Resources, &u.Slots); err != nil {
			return u, err
		}
		u.UpdatedAt, err = parseTime("updated_at", updatedAt)
		return u, err
	})
}

// wakeQuotaWaiters makes the retries of the owner's resources waiting for quota on the
// provisioner due, and logs a change of each so that the agents take them up at once.
func wakeQuotaWaiters(ctx context.Context, tx *sql.Tx, owner, provisioner string) error {
	rows, err := tx.QueryContext(ctx, backend.WakeQuotaWaitersSQL, owner, provisioner)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, backend.LogChangeSQL, id); err != nil {
			return err
		}
	}
	return nil
}

// setMax is the value a QuotaLimit writes: its maximum when it is set, else NULL.
func setMax(l domain.QuotaLimit) *int64 {
	if !l.Set {
		return nil
	}
	return l.Max
}
