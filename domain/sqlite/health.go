package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// ListCheckable returns up to limit provisioned resources (ready or unhealthy at their
// generation, not paused) with an id after afterID, by id, leaving out those another holder
// than holder has a live lease on. Its WHERE clause matches resources_checkable_idx; the
// lease condition (ClaimResource's) and paused filter the rows it reads.
func (s *State) ListCheckable(ctx context.Context, afterID string, limit int, holder string) ([]domain.Resource, error) {
	if err := backend.CheckCheckablePage(limit, holder); err != nil {
		return nil, err
	}
	after := "" // sorts before every id
	if afterID != "" {
		var err error
		if after, err = parseID(afterID); err != nil {
			return nil, err
		}
	}
	out, err := s.queryResources(ctx, `
		SELECT `+resourceColumns+` FROM resources
		 WHERE status IN ('ready', 'unhealthy') AND generation = observed_generation AND NOT paused AND id > $1
		   AND `+leaseFreeSQL("$3")+`
		 ORDER BY id LIMIT $2`, after, limit, holder)
	if err != nil {
		return nil, fmt.Errorf("list checkable resources: %w", err)
	}
	return out, nil
}

// RecordHealth applies h while the row is as checked read it (domain.Checked), decided by
// the UPDATE's condition under the write lock; when it matches no row, the row's lease and
// guards, read in the same transaction, say why. The 'health' intent makes the trigger's
// status event a health event; each repair is added as a repair event.
func (s *State) RecordHealth(ctx context.Context, id string, checked domain.Checked, h domain.HealthUpdate) (domain.Resource, error) {
	if err := backend.CheckHealthUpdate(h); err != nil {
		return domain.Resource{}, err
	}
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	var since any
	if h.Status == domain.StatusUnhealthy {
		since = FormatTime(h.UnhealthySince)
	}
	state, err := encodeJSON("state", h.State)
	if err != nil {
		return domain.Resource{}, err
	}
	config, err := encodeJSON("config", h.Config)
	if err != nil {
		return domain.Resource{}, err
	}
	var r domain.Resource
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO write_intents (resource_id, intent) VALUES ($1, 'health')
			ON CONFLICT DO NOTHING`, uid); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `
			UPDATE resources
			   SET status = $3,
			       `+statusChangedSQL("$3")+`,
			       status_message = $4,
			       reason = $10,
			       unhealthy_since = CASE WHEN $3 = 'unhealthy' THEN coalesce(unhealthy_since, $5) END,
			       state = coalesce($6, state),
			       config = coalesce($7, config),
			       `+touchSQL+`
			 WHERE id = $1 AND generation = $2 AND observed_generation = generation AND lease_token = $8
			   AND status IN ('ready', 'unhealthy') AND NOT paused AND NOT hibernate
			   AND `+leaseFreeSQL("$9"),
			uid, checked.Generation, string(h.Status), h.StatusMessage, since, state, config, checked.LeaseToken, checked.Holder,
			string(h.Reason))
		if err != nil {
			return describeDBError(err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			l, err := readLease(ctx, tx, uid)
			if err != nil {
				return err
			}
			return backend.HealthRefused(id, l, checked)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM write_intents WHERE resource_id = $1 AND intent = 'health'`, uid); err != nil {
			return err
		}
		if r, err = readResource(ctx, tx, uid); err != nil {
			return err
		}
		if h.Status == domain.StatusError {
			// Hand the row to the provisioner, which keeps looking at it with backoff.
			if _, err := tx.ExecContext(ctx, backend.LogChangeSQL, uid); err != nil {
				return fmt.Errorf("log the change: %w", err)
			}
		}
		for _, repair := range h.Repairs {
			if _, err := tx.ExecContext(ctx, backend.InsertRepairEventSQL, uid, string(r.Status), repair); err != nil {
				return fmt.Errorf("record repair: %w", err)
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return r, nil
	case errors.Is(err, domain.ErrStale), errors.Is(err, domain.ErrNotFound):
		return domain.Resource{}, err
	}
	return domain.Resource{}, fmt.Errorf("record health of resource %s: %w", id, err)
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
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		for _, repair := range repairs {
			res, err := tx.ExecContext(ctx, backend.InsertRepairEventNowSQL, uid, repair)
			if err != nil {
				return describeDBError(err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 0 {
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
	rows, err := s.read.QueryContext(ctx, `SELECT status, count(*) FROM resources GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count resources by status: %w", err)
	}
	defer rows.Close()
	out := make(map[domain.Status]int)
	for rows.Next() {
		var (
			status domain.Status
			n      int
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("count resources by status: %w", err)
		}
		out[status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count resources by status: %w", err)
	}
	return out, nil
}

// ListWaitingForCapacity returns pending resources waiting for room, longest waiting first.
func (s *State) ListWaitingForCapacity(ctx context.Context, limit int) ([]domain.Resource, error) {
	if limit <= 0 {
		limit = -1 // no limit
	}
	out, err := s.queryResources(ctx, `
		SELECT `+resourceColumns+` FROM resources
		 WHERE status = 'pending' AND reason = 'WaitingForCapacity'
		 ORDER BY waiting_since, created_at, rowid LIMIT $1`, limit)
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
	if limit <= 0 {
		limit = -1 // no limit
	}
	rows, err := s.read.QueryContext(ctx, `
		SELECT seq, resource_id, at, kind, status, message FROM (
			SELECT * FROM resource_events WHERE resource_id = $1 ORDER BY seq DESC LIMIT $2
		) newest ORDER BY seq`, uid, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of resource %s: %w", resourceID, err)
	}
	out, err := collectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list events of resource %s: %w", resourceID, err)
	}
	return out, nil
}

// PruneEvents deletes, while term holds, the events recorded more than olderThan ago.
func (s *State) PruneEvents(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	return s.prune(ctx, term, backend.PrunableEvents, olderThan)
}
