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

// ResourcesNeedingAttention lists a page of the resources the agent has work on, in id
// order. Its predicate is that of resources_needing_attention_idx; the primary key's
// index serves the page, so reading every page reads the table once.
func (s *State) ResourcesNeedingAttention(ctx context.Context, afterID string, limit int) ([]domain.Attention, error) {
	after, err := pageStart(afterID, limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id::text, next_attempt_at FROM resources
		 WHERE (status IN ('pending', 'provisioning', 'deleting', 'error') OR generation <> observed_generation)
		   AND id > $1
		 ORDER BY id
		 LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list resources needing attention: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Attention, error) {
		var a domain.Attention
		err := row.Scan(&a.ID, &a.NotBefore)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("list resources needing attention: %w", err)
	}
	return out, nil
}

// pageStart is the id a page of ResourcesNeedingAttention starts after: the nil UUID, below
// every id, for the first page.
func pageStart(afterID string, limit int) (pgtype.UUID, error) {
	if err := backend.CheckAttentionPage(limit); err != nil {
		return pgtype.UUID{}, err
	}
	if afterID == "" {
		return pgtype.UUID{Valid: true}, nil
	}
	var after pgtype.UUID
	if err := after.Scan(afterID); err != nil {
		return after, &domain.FieldError{Field: "afterID", Msg: fmt.Sprintf("%q is not a resource id (a UUID): pass the last id of the page before", afterID)}
	}
	return after, nil
}

// claimAttempts bounds ClaimResource's retries when the lease it saw held is freed meanwhile.
const claimAttempts = 3

// ClaimResource takes or renews holder's lease on the resource for ttl (database clock).
func (s *State) ClaimResource(ctx context.Context, id, holder string, ttl time.Duration) (domain.Resource, error) {
	r, _, err := s.claim(ctx, id, holder, ttl, nil)
	return r, err
}

// ClaimAndStart takes or renews holder's lease like ClaimResource and, in the same statement,
// starts provisioning a row nothing has been done to yet (see domain.ReconcileStore). The row
// is locked first and the start decided on the version locked, so a change committed
// meanwhile (a delete request, new args) is what the decision sees.
func (s *State) ClaimAndStart(ctx context.Context, id, holder string, ttl time.Duration, start domain.ProvisioningStart) (domain.Resource, bool, error) {
	if err := backend.CheckStart(id, start); err != nil {
		return domain.Resource{}, false, err
	}
	return s.claim(ctx, id, holder, ttl, &start)
}

// claim is ClaimResource, and ClaimAndStart when start is set.
func (s *State) claim(ctx context.Context, id, holder string, ttl time.Duration, start *domain.ProvisioningStart) (domain.Resource, bool, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, false, err
	}
	if err := backend.CheckClaim(id, holder, ttl); err != nil {
		return domain.Resource{}, false, err
	}
	for attempt := 0; ; attempt++ {
		var (
			r       domain.Resource
			started bool
		)
		if start == nil {
			r, err = scanResource(s.pool.QueryRow(ctx, `
				UPDATE resources
				   SET lease_holder = $2, lease_expires_at = now() + $3::float8 * interval '1 second'
				 WHERE id = $1 AND `+leaseFreeSQL+`
				RETURNING `+resourceColumns, uid, holder, ttl.Seconds()))
		} else {
			r, err = scanResource(rowWith{s.pool.QueryRow(ctx, `
				WITH claimed AS (
					SELECT id AS claimed_id,
					       status = 'pending' AND status_message = '' AND next_attempt_at IS NULL
					       AND provisioner IN ('', $4) AND type = ANY ($5::text[]) AS start
					  FROM resources
					 WHERE id = $1 AND `+leaseFreeSQL+`
					   FOR UPDATE
				)
				UPDATE resources
				   SET lease_holder = $2, lease_expires_at = now() + $3::float8 * interval '1 second',
				       status = CASE WHEN start THEN 'provisioning' ELSE status END,
				       status_message = CASE WHEN start THEN $6 || generation ELSE status_message END,
				       provisioner = CASE WHEN start THEN $4 ELSE provisioner END
				  FROM claimed
				 WHERE id = claimed_id
				RETURNING `+resourceColumns+`, start`,
				uid, holder, ttl.Seconds(), start.Provisioner, backend.StartTypes(*start), domain.ProvisioningMessagePrefix,
			), []any{&started}})
		}
		if err == nil {
			return r, started, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return domain.Resource{}, false, fmt.Errorf("claim resource %s: %w", id, err)
		}
		l, err := s.readLease(ctx, uid)
		if err != nil {
			return domain.Resource{}, false, fmt.Errorf("claim resource %s: %w", id, err)
		}
		if (l.Live && l.Holder != holder) || attempt+1 == claimAttempts {
			return domain.Resource{}, false, fmt.Errorf("claim resource %s: %w", id, l.HeldError())
		}
	}
}

// rowWith is a row whose last columns, after those its scanner reads, go into extra.
type rowWith struct {
	pgx.Row
	extra []any
}

func (r rowWith) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// ReleaseResource clears holder's lease; it does nothing when holder does not hold it.
func (s *State) ReleaseResource(ctx context.Context, id, holder string) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `
		UPDATE resources SET lease_holder = NULL, lease_expires_at = NULL
		 WHERE id = $1 AND lease_holder = $2`, uid, holder)
	if err != nil {
		return fmt.Errorf("release lease on resource %s: %w", id, err)
	}
	return nil
}

// HandOverResource clears holder's lease and logs a change of the resource when it held it.
func (s *State) HandOverResource(ctx context.Context, id, holder string) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			WITH released AS (
				UPDATE resources SET lease_holder = NULL, lease_expires_at = NULL
				 WHERE id = $1 AND lease_holder = $2
				RETURNING id
			)
			INSERT INTO change_log (resource_id) SELECT id FROM released`, uid, holder)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify('berth_resource_changes', '')`)
		return err
	})
	if err != nil {
		return fmt.Errorf("hand over resource %s: %w", id, err)
	}
	return nil
}

// RecordProgress applies u while holder's lease is live, the row is at u.Generation and not
// being deleted (unless u moves it to deleting). Pinning a provisioner applies only while the
// row's provisioner is unset or already the same; a client's different choice gives ErrStale.
// With u.ReleaseLease the same statement clears the lease.
func (s *State) RecordProgress(ctx context.Context, id, holder string, u domain.ProgressUpdate) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	r, err := scanResource(s.pool.QueryRow(ctx, `
		UPDATE resources
		   SET status = $4,
		       status_message = $5,
		       provisioner = CASE WHEN $6 = '' THEN provisioner ELSE $6 END,
		       state = coalesce($7, state),
		       config = coalesce($8, config),
		       observed_generation = coalesce($9, observed_generation),
		       attempts = $10,
		       next_attempt_at = $11,
		       last_error = $12,
		       ready_at = CASE WHEN $4 = 'ready' THEN coalesce(ready_at, now()) ELSE ready_at END,
		       lease_holder = CASE WHEN $13 THEN NULL ELSE lease_holder END,
		       lease_expires_at = CASE WHEN $13 THEN NULL ELSE lease_expires_at END
		 WHERE id = $1
		   AND lease_holder = $2 AND lease_expires_at >= now()
		   AND generation = $3
		   AND (status <> 'deleting' OR $4 = 'deleting')
		   AND ($6 = '' OR provisioner IN ('', $6))
		RETURNING `+resourceColumns,
		uid, holder, u.Generation, string(u.Status), u.StatusMessage, u.Provisioner,
		nilMap(u.State), nilMap(u.Config), u.ObservedGeneration,
		u.Attempts, u.NextAttemptAt, u.LastError, u.ReleaseLease))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, describeDBError(err))
	}
	l, err := s.readLease(ctx, uid)
	if err != nil {
		return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, err)
	}
	return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, l.ProgressError(holder, u))
}

// FinalizeDelete removes a deleting resource's row while holder holds its lease. A row already
// gone gives ErrNotFound (the caller's work is done); one no longer deleting gives ErrStale.
func (s *State) FinalizeDelete(ctx context.Context, id, holder string) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	var deleted int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL berth.finalizing = 'on'`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			DELETE FROM resources
			 WHERE id = $1 AND status = 'deleting'
			   AND lease_holder = $2 AND lease_expires_at >= now()`, uid, holder)
		deleted = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("finalize delete of resource %s: %w", id, err)
	}
	if deleted == 1 {
		return nil
	}
	l, err := s.readLease(ctx, uid)
	if err != nil {
		return fmt.Errorf("finalize delete of resource %s: %w", id, err)
	}
	return fmt.Errorf("finalize delete of resource %s: %w", id, l.FinalizeError(holder))
}

// readLease reads the row's lease and guards, and when the holder is a registered agent
// whether that agent is live and until when; a missing row gives ErrNotFound.
func (s *State) readLease(ctx context.Context, uid pgtype.UUID) (backend.Lease, error) {
	var (
		l         backend.Lease
		holder    *string
		expiresAt *time.Time
		deadline  *time.Time
	)
	err := s.pool.QueryRow(ctx, `
		SELECT r.lease_holder, r.lease_expires_at,
		       coalesce(r.lease_expires_at >= now(), false) AND (a.id IS NULL OR NOT (`+agentDeadSQL+`)),
		       a.heartbeat_at + a.ttl_ms * interval '1 millisecond',
		       r.generation, r.status, r.provisioner
		  FROM resources r LEFT JOIN agents a ON a.id = r.lease_holder
		 WHERE r.id = $1`, uid,
	).Scan(&holder, &expiresAt, &l.Live, &deadline, &l.Generation, &l.Status, &l.Provisioner)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, notFound(uid.String())
	}
	if err != nil {
		return l, err
	}
	if holder != nil {
		l.Holder = *holder
	}
	if expiresAt != nil {
		l.ExpiresAt = *expiresAt
	}
	if deadline != nil {
		l.AgentDeadline = *deadline
	}
	return l, nil
}

// nilMap keeps a nil map nil (SQL NULL: keep the column) rather than encoding it as {}.
func nilMap(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}
