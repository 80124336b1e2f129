package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// ListCheckable returns up to limit provisioned resources (ready or unhealthy at their
// generation, not paused) with an id after afterID, by id, leaving out those another holder
// than holder has a live lease on. Each page walks resources_checkable_idx from afterID and
// reads about limit rows, wherever in the table it starts.
func (s *State) ListCheckable(ctx context.Context, afterID string, limit int, holder string) ([]domain.Resource, error) {
	if err := backend.CheckCheckablePage(limit, holder); err != nil {
		return nil, err
	}
	dead, err := s.deadAgents(ctx)
	if err != nil {
		return nil, fmt.Errorf("list checkable resources: %w", err)
	}
	query, args := checkableFirstPage, []any{limit, holder, dead}
	if afterID != "" {
		uid, err := parseID(afterID)
		if err != nil {
			return nil, err
		}
		query, args = checkableNextPage, []any{limit, holder, dead, uid}
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list checkable resources: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Resource, error) {
		return scanResource(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list checkable resources: %w", err)
	}
	return out, nil
}

// The checkable pages, written so that every page walks resources_checkable_idx in id order
// and stops after limit rows; otherwise each page sorts the rest of the table and a sweep
// costs the square of the resources:
//   - the status condition is the index's predicate;
//   - ORDER BY names the table's column: the selected id::text is also called id, and
//     ordering by that text cannot use the index;
//   - the id bound is a plain index condition (no "$1 IS NULL OR", which a generic plan
//     cannot use as a bound);
//   - the lease condition (the same as ClaimResource's, on the database clock) is a filter
//     on the rows the walk reads; rows leased by another agent are few and brief, so a page
//     still reads about limit rows. The agents that are not live, whose leases are void, are
//     read first and given as $3, so the page's plan stays one walk of the index. Paused
//     rows are left out by a filter too;
//   - observed_generation never exceeds generation (it is a generation the agent worked on,
//     and generation only grows), so ">=" means "=". It is written so because the planner
//     guesses that an equality of two columns keeps 0.5% of the rows, too few to be worth
//     walking the index for.
const (
	checkableFirstPage = `
		SELECT ` + resourceColumns + ` FROM resources
		 WHERE status IN ('ready', 'unhealthy') AND observed_generation >= generation AND NOT paused
		   AND (lease_holder IS NULL OR lease_holder = $2 OR lease_expires_at < now() OR lease_holder = ANY ($3::text[]))
		 ORDER BY resources.id LIMIT $1`
	checkableNextPage = `
		SELECT ` + resourceColumns + ` FROM resources
		 WHERE status IN ('ready', 'unhealthy') AND observed_generation >= generation AND NOT paused
		   AND (lease_holder IS NULL OR lease_holder = $2 OR lease_expires_at < now() OR lease_holder = ANY ($3::text[]))
		   AND id > $4
		 ORDER BY resources.id LIMIT $1`
)

// RecordHealth applies h while the row is as checked read it (domain.Checked): the UPDATE's
// condition, which PostgreSQL checks again on the row it has locked. The transaction tags
// the trigger's status event as a health event and adds a repair event per repair. When
// the UPDATE matches no row, the row's lease and guards, read then, say why.
func (s *State) RecordHealth(ctx context.Context, id string, checked domain.Checked, h domain.HealthUpdate) (domain.Resource, error) {
	if err := backend.CheckHealthUpdate(h); err != nil {
		return domain.Resource{}, err
	}
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	var since *time.Time
	if h.Status == domain.StatusUnhealthy {
		since = &h.UnhealthySince
	}
	var r domain.Resource
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL berth.event_kind = 'health'`); err != nil {
			return err
		}
		var err error
		r, err = scanResource(tx.QueryRow(ctx, `
			UPDATE resources
			   SET status = $5,
			       status_message = $6,
			       reason = $10,
			       unhealthy_since = CASE WHEN $5 = 'unhealthy' THEN coalesce(unhealthy_since, $7) END,
			       state = coalesce($8, state),
			       config = coalesce($9, config)
			 WHERE id = $1 AND generation = $3 AND observed_generation = generation AND lease_token = $4
			   AND status IN ('ready', 'unhealthy') AND NOT paused AND NOT hibernate
			   AND `+leaseFreeSQL+`
			RETURNING `+resourceColumns,
			uid, checked.Holder, checked.Generation, checked.LeaseToken,
			string(h.Status), h.StatusMessage, since, nilMap(h.State), nilMap(h.Config), string(h.Reason)))
		if err != nil {
			return err
		}
		if h.Status == domain.StatusError {
			// Hand the row to the provisioner, which keeps looking at it with backoff.
			if _, err := tx.Exec(ctx, backend.LogChangeSQL, uid); err != nil {
				return fmt.Errorf("log the change: %w", err)
			}
			if _, err := tx.Exec(ctx, `SELECT pg_notify('berth_resource_changes', '')`); err != nil {
				return fmt.Errorf("log the change: %w", err)
			}
		}
		for _, repair := range h.Repairs {
			if _, err := tx.Exec(ctx, backend.InsertRepairEventSQL, uid, string(r.Status), repair); err != nil {
				return fmt.Errorf("record repair: %w", err)
			}
		}
		return nil
	})
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return domain.Resource{}, fmt.Errorf("record health of resource %s: %w", id, describeDBError(err))
	}
	l, err := s.readLease(ctx, uid)
	if err != nil {
		return domain.Resource{}, fmt.Errorf("record health of resource %s: %w", id, err)
	}
	return domain.Resource{}, backend.HealthRefused(id, l, checked)
}

// RecordRepairs records each repair as a repair event of the resource in its status now,
// in one transaction.
func (s *State) RecordRepairs(ctx context.Context, id string, repairs []string) error {
	if err := backend.CheckRepairs(repairs); err != nil {
		return err
	}
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, repair := range repairs {
			tag, err := tx.Exec(ctx, backend.InsertRepairEventNowSQL, uid, repair)
			if err != nil {
				return describeDBError(err)
			}
			if tag.RowsAffected() == 0 {
				return notFound(id)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record repairs of resource %s: %w", id, err)
	}
	return nil
}

// CountResourcesByStatus counts the resources in each status.
func (s *State) CountResourcesByStatus(ctx context.Context) (map[domain.Status]int, error) {
	out := make(map[domain.Status]int)
	var (
		status domain.Status
		n      int
	)
	err := s.queryWhole(ctx, `SELECT status, count(*)::int FROM resources GROUP BY status`, nil, func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error {
			out[status] = n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count resources by status: %w", err)
	}
	return out, nil
}

// ListWaitingForCapacity returns pending resources waiting for room, longest waiting first.
func (s *State) ListWaitingForCapacity(ctx context.Context, limit int) ([]domain.Resource, error) {
	var limitArg *int
	if limit > 0 {
		limitArg = &limit
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+resourceColumns+` FROM resources
		 WHERE status = 'pending' AND reason = 'WaitingForCapacity'
		 ORDER BY waiting_since, created_at, id LIMIT $1`, limitArg)
	if err != nil {
		return nil, fmt.Errorf("list resources waiting for capacity: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Resource, error) {
		return scanResource(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list resources waiting for capacity: %w", err)
	}
	return out, nil
}

// ListEvents returns the resource's newest limit events, oldest first.
func (s *State) ListEvents(ctx context.Context, resourceID string, limit int) ([]domain.Event, error) {
	uid, err := parseID(resourceID)
	if err != nil {
		return nil, err
	}
	var limitArg *int
	if limit > 0 {
		limitArg = &limit
	}
	rows, err := s.pool.Query(ctx, `
		SELECT seq, resource_id::text, at, kind, status, message FROM (
			SELECT * FROM resource_events WHERE resource_id = $1 ORDER BY seq DESC LIMIT $2
		) newest ORDER BY seq`, uid, limitArg)
	if err != nil {
		return nil, fmt.Errorf("list events of resource %s: %w", resourceID, err)
	}
	out, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list events of resource %s: %w", resourceID, err)
	}
	return out, nil
}

// PruneEvents deletes, while term holds, the events recorded more than olderThan ago.
func (s *State) PruneEvents(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	return s.prune(ctx, term, backend.PrunableEvents, olderThan)
}
