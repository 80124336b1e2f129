package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// SetOwnerPolicy creates or replaces p.Owner's policy.
func (s *State) SetOwnerPolicy(ctx context.Context, p domain.OwnerPolicy) (domain.OwnerPolicy, error) {
	if err := p.Validate(); err != nil {
		return domain.OwnerPolicy{}, err
	}
	row := s.pool.QueryRow(ctx, `
		INSERT INTO owner_policies (owner, weight, class) VALUES ($1, $2, $3)
		ON CONFLICT (owner) DO UPDATE SET weight = EXCLUDED.weight, class = EXCLUDED.class, updated_at = now()
		RETURNING owner, weight, class, updated_at`, p.Owner, p.Weight, p.Class)
	out, err := scanOwnerPolicy(row)
	if err != nil {
		return domain.OwnerPolicy{}, fmt.Errorf("set the policy of owner %q: %w", p.Owner, err)
	}
	return out, nil
}

// OwnerPolicy returns owner's policy.
func (s *State) OwnerPolicy(ctx context.Context, owner string) (domain.OwnerPolicy, error) {
	out, err := scanOwnerPolicy(s.pool.QueryRow(ctx,
		`SELECT owner, weight, class, updated_at FROM owner_policies WHERE owner = $1`, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.OwnerPolicy{}, fmt.Errorf("policy of owner %q: %w (it has the default weight and class)", owner, domain.ErrNotFound)
	}
	if err != nil {
		return domain.OwnerPolicy{}, fmt.Errorf("read the policy of owner %q: %w", owner, err)
	}
	return out, nil
}

// ListOwnerPolicies lists every policy, by owner.
func (s *State) ListOwnerPolicies(ctx context.Context) ([]domain.OwnerPolicy, error) {
	rows, err := s.pool.Query(ctx, `SELECT owner, weight, class, updated_at FROM owner_policies ORDER BY owner`)
	if err != nil {
		return nil, fmt.Errorf("list owner policies: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.OwnerPolicy, error) { return scanOwnerPolicy(row) })
	if err != nil {
		return nil, fmt.Errorf("list owner policies: %w", err)
	}
	return out, nil
}

// RemoveOwnerPolicy removes owner's policy.
func (s *State) RemoveOwnerPolicy(ctx context.Context, owner string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM owner_policies WHERE owner = $1`, owner)
	if err != nil {
		return fmt.Errorf("remove the policy of owner %q: %w", owner, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("policy of owner %q: %w", owner, domain.ErrNotFound)
	}
	return nil
}

// OwnerSummaries lists every owner that has resources or a policy, in one statement.
func (s *State) OwnerSummaries(ctx context.Context) ([]domain.OwnerSummary, error) {
	var out []domain.OwnerSummary
	err := s.queryWhole(ctx, `
		WITH counts AS (
		    SELECT owner, count(*) AS resources,
		           count(*) FILTER (WHERE `+backend.NeedsAttentionSQL+`) AS queued
		      FROM resources GROUP BY owner)
		SELECT coalesce(p.owner, c.owner), coalesce(p.weight, 1), coalesce(p.class, ''),
		       coalesce(p.updated_at, 'epoch'::timestamptz), p.owner IS NOT NULL,
		       coalesce(c.resources, 0), coalesce(c.queued, 0)
		  FROM owner_policies p FULL JOIN counts c ON c.owner = p.owner
		 ORDER BY 1`, nil, func(rows pgx.Rows) (err error) {
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (o domain.OwnerSummary, err error) {
			err = row.Scan(&o.Owner, &o.Weight, &o.Class, &o.UpdatedAt, &o.HasPolicy, &o.Resources, &o.Queued)
			if !o.HasPolicy {
				o.UpdatedAt = time.Time{}
			}
			return o, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list owners: %w", err)
	}
	return out, nil
}

// resourceOwnersSQL reads the owners of the ids $1.
const resourceOwnersSQL = `SELECT id::text, owner FROM resources WHERE id = ANY($1::uuid[])`

// ResourceOwners returns the owner of each of ids that exists, by primary key.
func (s *State) ResourceOwners(ctx context.Context, ids []string) (map[string]string, error) {
	uids := make([]pgtype.UUID, 0, len(ids))
	for _, id := range ids {
		if uid, err := parseID(id); err == nil {
			uids = append(uids, uid)
		}
	}
	out := make(map[string]string, len(uids))
	if len(uids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, resourceOwnersSQL, uids)
	if err != nil {
		return nil, fmt.Errorf("look up the owners of %d resources: %w", len(uids), err)
	}
	var id, owner string
	if _, err := pgx.ForEachRow(rows, []any{&id, &owner}, func() error {
		out[id] = owner
		return nil
	}); err != nil {
		return nil, fmt.Errorf("look up the owners of %d resources: %w", len(uids), err)
	}
	return out, nil
}

func scanOwnerPolicy(row pgx.Row) (p domain.OwnerPolicy, err error) {
	err = row.Scan(&p.Owner, &p.Weight, &p.Class, &p.UpdatedAt)
	return p, err
}
