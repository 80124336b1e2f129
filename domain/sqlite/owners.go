package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// SetOwnerPolicy creates or replaces p.Owner's policy.
func (s *State) SetOwnerPolicy(ctx context.Context, p domain.OwnerPolicy) (domain.OwnerPolicy, error) {
	if err := p.Validate(); err != nil {
		return domain.OwnerPolicy{}, err
	}
	var out domain.OwnerPolicy
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanOwnerPolicy(tx.QueryRowContext(ctx, `
		INSERT INTO owner_policies (owner, weight, class) VALUES ($1, $2, $3)
		ON CONFLICT (owner) DO UPDATE SET weight = excluded.weight, class = excluded.class, updated_at = `+nowSQL+`
		RETURNING owner, weight, class, updated_at`, p.Owner, p.Weight, p.Class))
		return err
	})
	if err != nil {
		return domain.OwnerPolicy{}, fmt.Errorf("set the policy of owner %q: %w", p.Owner, err)
	}
	return out, nil
}

// OwnerPolicy returns owner's policy.
func (s *State) OwnerPolicy(ctx context.Context, owner string) (domain.OwnerPolicy, error) {
	out, err := scanOwnerPolicy(s.read.QueryRowContext(ctx,
		`SELECT owner, weight, class, updated_at FROM owner_policies WHERE owner = $1`, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return domain.OwnerPolicy{}, fmt.Errorf("policy of owner %q: %w (it has the default weight and class)", owner, domain.ErrNotFound)
	}
	if err != nil {
		return domain.OwnerPolicy{}, fmt.Errorf("read the policy of owner %q: %w", owner, err)
	}
	return out, nil
}

// ListOwnerPolicies lists every policy, by owner.
func (s *State) ListOwnerPolicies(ctx context.Context) ([]domain.OwnerPolicy, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT owner, weight, class, updated_at FROM owner_policies ORDER BY owner`)
	if err != nil {
		return nil, fmt.Errorf("list owner policies: %w", err)
	}
	out, err := collectRows(rows, scanOwnerPolicy)
	if err != nil {
		return nil, fmt.Errorf("list owner policies: %w", err)
	}
	return out, nil
}

// RemoveOwnerPolicy removes owner's policy.
func (s *State) RemoveOwnerPolicy(ctx context.Context, owner string) error {
	n, err := s.exec(ctx, `DELETE FROM owner_policies WHERE owner = $1`, owner)
	if err != nil {
		return fmt.Errorf("remove the policy of owner %q: %w", owner, err)
	}
	if n == 0 {
		return fmt.Errorf("policy of owner %q: %w", owner, domain.ErrNotFound)
	}
	return nil
}

// OwnerSummaries lists every owner that has resources or a policy, in one statement.
func (s *State) OwnerSummaries(ctx context.Context) ([]domain.OwnerSummary, error) {
	rows, err := s.read.QueryContext(ctx, `
		WITH counts AS (
		    SELECT owner, count(*) AS resources,
		           sum(CASE WHEN `+backend.NeedsAttentionSQL+` THEN 1 ELSE 0 END) AS queued
		      FROM resources GROUP BY owner),
		owners AS (SELECT owner FROM owner_policies UNION SELECT owner FROM counts)
		SELECT o.owner, coalesce(p.weight, 1), coalesce(p.class, ''), p.updated_at,
		       coalesce(c.resources, 0), coalesce(c.queued, 0)
		  FROM owners o LEFT JOIN owner_policies p ON p.owner = o.owner
		       LEFT JOIN counts c ON c.owner = o.owner
		 ORDER BY o.owner`)
	if err != nil {
		return nil, fmt.Errorf("list owners: %w", err)
	}
	out, err := collectRows(rows, func(row rowScanner) (o domain.OwnerSummary, err error) {
		var updated sql.NullString
		if err := row.Scan(&o.Owner, &o.Weight, &o.Class, &updated, &o.Resources, &o.Queued); err != nil {
			return o, err
		}
		if o.HasPolicy = updated.Valid; o.HasPolicy {
			o.UpdatedAt, err = parseTime("updated_at", updated.String)
		}
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("list owners: %w", err)
	}
	return out, nil
}

// ResourceOwners returns the owner of each of ids that exists, by primary key, in one
// statement that gets the ids as one JSON array.
func (s *State) ResourceOwners(ctx context.Context, ids []string) (map[string]string, error) {
	stored := make([]string, 0, len(ids))
	for _, id := range ids {
		if u, err := uuidString(id); err == nil {
			stored = append(stored, u)
		}
	}
	out := make(map[string]string, len(stored))
	if len(stored) == 0 {
		return out, nil
	}
	what := fmt.Sprintf("look up the owners of %d resources", len(stored))
	rows, err := s.queryIDs(ctx, what, `
		SELECT resources.id, resources.owner FROM json_each($1) AS t JOIN resources ON resources.id = t.value`, stored)
	if err != nil {
		return nil, err
	}
	pairs, err := collectRows(rows, func(row rowScanner) (p [2]string, err error) {
		err = row.Scan(&p[0], &p[1])
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for _, p := range pairs {
		out[p[0]] = p[1]
	}
	return out, nil
}

func scanOwnerPolicy(row rowScanner) (p domain.OwnerPolicy, err error) {
	var updated string
	if err := row.Scan(&p.Owner, &p.Weight, &p.Class, &updated); err != nil {
		return p, err
	}
	p.UpdatedAt, err = parseTime("updated_at", updated)
	return p, err
}
