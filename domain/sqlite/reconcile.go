package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// ResourcesNeedingAttention lists a page of the resources the agent has work on, in id
// order. Its predicate is that of resources_needing_attention_idx; the primary key's
// index serves the page, so reading every page reads the table once.
func (s *State) ResourcesNeedingAttention(ctx context.Context, afterID string, limit int) ([]domain.Attention, error) {
	if err := backend.CheckAttentionPage(limit); err != nil {
		return nil, err
	}
	return s.attention(ctx, "list resources needing attention", `
		SELECT id, owner, next_attempt_at FROM resources
		 WHERE `+backend.NeedsAttentionSQL+`
		   AND id > $1
		 ORDER BY id
		 LIMIT $2`, afterID, limit)
}

// attention runs query, which reads resources' id, owner and next_attempt_at, and returns
// them as a list of resources needing attention; what says what it lists in its errors.
func (s *State) attention(ctx context.Context, what, query string, args ...any) ([]domain.Attention, error) {
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := collectRows(rows, func(row rowScanner) (a domain.Attention, err error) {
		var next sql.NullString
		if err := row.Scan(&a.ID, &a.Owner, &next); err != nil {
			return a, err
		}
		a.NotBefore, err = parseOptionalTime("next_attempt_at", next)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// ClaimResource takes or renews holder's lease on the resource for ttl (database clock).
func (s *State) ClaimResource(ctx context.Context, id, holder string, ttl time.Duration) (domain.Claim, error) {
	return s.claim(ctx, id, holder, ttl, nil)
}

// ClaimAndStart takes or renews holder's lease like ClaimResource and, in the same
// transaction, starts provisioning a row nothing has been done to yet (see
// domain.ReconcileStore).
func (s *State) ClaimAndStart(ctx context.Context, id, holder string, ttl time.Duration, start domain.ProvisioningStart) (domain.Claim, error) {
	if err := backend.CheckStart(id, start); err != nil {
		return domain.Claim{}, err
	}
	return s.claim(ctx, id, holder, ttl, &start)
}

// claim is ClaimResource, and ClaimAndStart when start is set. The transaction holds the
// write lock, so the previous lease it reads first is the one its claim replaces, and
// whether the row may be started there is still so when the one UPDATE that takes the lease
// (and starts the row) runs.
func (s *State) claim(ctx context.Context, id, holder string, ttl time.Duration, start *domain.ProvisioningStart) (domain.Claim, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Claim{}, err
	}
	if err := backend.CheckClaim(id, holder, ttl); err != nil {
		return domain.Claim{}, err
	}
	var provisioner string
	if start != nil {
		provisioner = start.Provisioner
	}
	var (
		c   domain.Claim
		raw rawResource
	)
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var (
			previous sql.NullString
			waitedMS int64
			status   domain.Status
			reason   domain.Reason
			retrying bool
			held     bool // paused, or to be hibernated
			pinned   string
			rowType  domain.ResourceType
			admitted domain.ClaimedAdmission
		)
		err := tx.QueryRowContext(ctx, `
			SELECT r.lease_holder,
			       coalesce(CAST(round((julianday('now') - julianday(min(coalesce(a.heartbeat_at, r.lease_expires_at), r.lease_expires_at))) * 86400000) AS INTEGER), 0),
			       r.status, r.reason, r.next_attempt_at IS NOT NULL, r.paused OR r.hibernate, r.provisioner, r.type,
			       coalesce(r.admitted_provisioner, ''), coalesce(r.admitted_units, 0),
			       NOT EXISTS (SELECT 1 FROM owner_quotas q WHERE q.owner = r.owner)
			  FROM resources r LEFT JOIN agents a ON a.id = r.lease_holder
			 WHERE r.id = $1`, uid).Scan(&previous, &waitedMS, &status, &reason, &retrying, &held, &pinned, &rowType,
			&admitted.Provisioner, &admitted.Units, &admitted.NoQuota)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(uid)
		}
		if err != nil {
			return err
		}
		// Nothing has been done to the row yet, it is neither paused nor to be hibernated, and
		// the default provisioner provisions it.
		startRow := start != nil && status == domain.StatusPending && reason == domain.ReasonCreated && !retrying && !held &&
			(pinned == "" || pinned == start.Provisioner) && slices.Contains(start.Types, rowType)
		// RETURNING gives the row as written: the statement leaves resources_after_update
		// nothing to change (see touchSQL).
		raw, err = scanRawResource(tx.QueryRowContext(ctx, `
			UPDATE resources
			   SET lease_holder = $2, lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', $3),
			       lease_token = lease_token + 1,
			       status = CASE WHEN $4 THEN 'provisioning' ELSE status END,
			       `+statusChangedSQL("CASE WHEN $4 THEN 'provisioning' ELSE status END")+`,
			       status_message = CASE WHEN $4 THEN $5 || generation ELSE status_message END,
			       reason = CASE WHEN $4 THEN 'Provisioning' ELSE reason END,
			       provisioner = CASE WHEN $4 THEN $6 ELSE provisioner END,
			       `+touchSQL+`
			 WHERE id = $1 AND `+leaseFreeSQL("$2")+`
			   AND NOT EXISTS (`+backend.SchemaNewerSQL+`$7)
			RETURNING `+resourceColumns,
			uid, holder, fmt.Sprintf("%+.3f seconds", ttl.Seconds()),
			startRow, domain.ProvisioningMessagePrefix, provisioner, s.schema))
		if errors.Is(err, sql.ErrNoRows) {
			if err := checkSchemaIn(ctx, tx, s.schema); err != nil {
				return err
			}
			l, err := readLease(ctx, tx, uid)
			if err != nil {
				return err
			}
			return l.HeldError()
		}
		if err != nil {
			return describeDBError(err)
		}
		c.Started = startRow
		c.Admission = admitted
		c.Lease = domain.Lease{Holder: holder, Token: raw.r.LeaseToken}
		var prev *string
		if previous.Valid {
			prev = &previous.String
		}
		c.Takeover = backend.LeaseTakeover(holder, prev, time.Duration(waitedMS)*time.Millisecond)
		return nil
	})
	if err == nil {
		c.Resource, err = raw.decode()
	}
	if err != nil {
		return domain.Claim{}, fmt.Errorf("claim resource %s: %w", id, err)
	}
	return c, nil
}

// ReleaseResource clears lease; it does nothing when lease is not the row's.
func (s *State) ReleaseResource(ctx context.Context, id string, lease domain.Lease) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	if _, err := s.exec(ctx, `
		UPDATE resources SET lease_holder = NULL, lease_expires_at = NULL, `+touchSQL+`
		 WHERE id = $1 AND lease_holder = $2 AND lease_token = $3`, uid, lease.Holder, lease.Token); err != nil {
		return fmt.Errorf("release lease on resource %s: %w", id, err)
	}
	return nil
}

// HandOverResource clears lease and logs a change of the resource when it was the row's.
func (s *State) HandOverResource(ctx context.Context, id string, lease domain.Lease) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE resources SET lease_holder = NULL, lease_expires_at = NULL, `+touchSQL+`
			 WHERE id = $1 AND lease_holder = $2 AND lease_token = $3`, uid, lease.Holder, lease.Token)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, backend.LogChangeSQL, uid)
		return err
	})
	if err != nil {
		return fmt.Errorf("hand over resource %s: %w", id, err)
	}
	return nil
}

// RecordProgress applies u while lease is the row's live lease, the row is at u.Generation and not
// being deleted (unless u moves it to deleting). Pinning a provisioner applies only while the
// row's provisioner is unset or already the same; a client's different choice gives ErrStale.
// With u.ReleaseLease the same statement clears the lease. The statement writes u.Reason
// with the status, keeps waiting_since while the reason stays one of domain.WaitingReasons (now when it becomes so, NULL otherwise) and stamps
// last_attempt_at.
func (s *State) RecordProgress(ctx context.Context, id string, lease domain.Lease, u domain.ProgressUpdate) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	if err := backend.CheckProgress(u); err != nil {
		return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, err)
	}
	state, err := encodeJSON("state", u.State)
	if err != nil {
		return domain.Resource{}, err
	}
	config, err := encodeJSON("config", u.Config)
	if err != nil {
		return domain.Resource{}, err
	}
	var admittedProvisioner sql.NullString
	var admittedUnits sql.NullInt64
	if u.Admission != nil {
		admittedProvisioner = sql.NullString{String: u.Admission.Provisioner, Valid: true}
		admittedUnits = sql.NullInt64{Int64: u.Admission.Units, Valid: true}
	}
	var raw rawResource
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		// Before the update, whose trigger writes its own event: a refused update returns an
		// error, and the transaction takes the passed step back with it.
		if p := u.Passed; p != nil && p.Message != "" {
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO resource_events (resource_id, kind, status, message) VALUES ($1, 'status', $2, $3)`,
				uid, string(p.Status), p.Message); err != nil {
				return describeDBError(err)
			}
		}
		// The statement sets what resources_after_update would (the retry bookkeeping of a
		// delete request, unhealthy_since), so RETURNING gives the row as it ends up.
		raw, err = scanRawResource(tx.QueryRowContext(ctx, `
			UPDATE resources
			   SET status = $4,
			       `+statusChangedSQL("$4")+`,
			       status_message = $5,
			       reason = $16,
			       waiting_since = CASE WHEN $16 NOT IN ('WaitingForCapacity', 'ResizeWaitingForCapacity', 'QuotaExceeded', 'BrokerUnavailable') THEN NULL
			                            WHEN reason = $16 THEN waiting_since ELSE `+nowSQL+` END,
			       last_attempt_at = `+nowSQL+`,
			       provisioner = CASE WHEN $6 = '' THEN provisioner ELSE $6 END,
			       state = coalesce($7, state),
			       config = coalesce($8, config),
			       observed_generation = coalesce($9, observed_generation),
			       attempts = CASE WHEN $4 = 'deleting' AND status <> 'deleting' THEN 0 ELSE $10 END,
			       next_attempt_at = CASE WHEN $4 = 'deleting' AND status <> 'deleting' THEN NULL
			                              WHEN $11 > 0 THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', $11 / 1000.0)) END,
			       last_error = CASE WHEN $4 = 'deleting' AND status <> 'deleting' THEN '' ELSE $12 END,
			       ready_at = CASE WHEN $4 = 'ready' THEN coalesce(ready_at, `+nowSQL+`) ELSE ready_at END,
			       unhealthy_since = CASE WHEN $4 = 'unhealthy' THEN unhealthy_since END,
			       lease_holder = CASE WHEN $13 THEN NULL ELSE lease_holder END,
			       lease_expires_at = CASE WHEN $13 THEN NULL ELSE lease_expires_at END,
			       admitted_provisioner = coalesce($17, admitted_provisioner),
			       admitted_units = coalesce($18, admitted_units),
			       `+touchSQL+`
			 WHERE id = $1
			   AND lease_holder = $2 AND lease_token = $14 AND lease_expires_at >= `+nowSQL+`
			   AND generation = $3
			   AND (status <> 'deleting' OR $4 = 'deleting')
			   AND ($6 = '' OR provisioner IN ('', $6))
			   AND NOT EXISTS (`+backend.SchemaNewerSQL+`$15)
			RETURNING `+resourceColumns,
			uid, lease.Holder, u.Generation, string(u.Status), u.StatusMessage, u.Provisioner,
			state, config, u.ObservedGeneration,
			u.Attempts, u.RetryIn.Milliseconds(), u.LastError, u.ReleaseLease, lease.Token, s.schema, string(u.Reason),
			admittedProvisioner, admittedUnits))
		if errors.Is(err, sql.ErrNoRows) {
			if err := checkSchemaIn(ctx, tx, s.schema); err != nil {
				return err
			}
			l, err := readLease(ctx, tx, uid)
			if err != nil {
				return err
			}
			return l.ProgressError(lease, u)
		}
		return describeDBError(err)
	})
	var r domain.Resource
	if err == nil {
		r, err = raw.decode()
	}
	if err != nil {
		return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, err)
	}
	return r, nil
}

// FinalizeDelete removes a deleting resource's row while lease is its live lease and the
// schema is no newer than this build knows. A row already gone gives ErrNotFound (the
// caller's work is done); one no longer deleting gives ErrStale.
func (s *State) FinalizeDelete(ctx context.Context, id string, lease domain.Lease) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO write_intents (resource_id, intent) VALUES ($1, 'finalize')
			ON CONFLICT DO NOTHING`, uid); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `
			DELETE FROM resources
			 WHERE id = $1 AND status = 'deleting'
			   AND lease_holder = $2 AND lease_token = $3 AND lease_expires_at >= `+nowSQL+`
			   AND NOT EXISTS (`+backend.SchemaNewerSQL+`$4)`, uid, lease.Holder, lease.Token, s.schema)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		if err := checkSchemaIn(ctx, tx, s.schema); err != nil {
			return err
		}
		l, err := readLease(ctx, tx, uid)
		if err != nil {
			return err
		}
		return l.FinalizeError(lease)
	})
	if err != nil {
		return fmt.Errorf("finalize delete of resource %s: %w", id, err)
	}
	return nil
}

// readLease reads the row's lease and guards inside tx, and when the holder is a registered
// agent whether that agent is live and until when; a missing row gives ErrNotFound.
func readLease(ctx context.Context, tx *sql.Tx, id string) (backend.Lease, error) {
	var (
		l         backend.Lease
		holder    sql.NullString
		expiresAt sql.NullString
		deadline  sql.NullString
	)
	err := tx.QueryRowContext(ctx, `
		SELECT r.lease_holder, r.lease_token, r.lease_expires_at,
		       coalesce(r.lease_expires_at >= `+nowSQL+`, 0) AND (a.id IS NULL OR NOT (`+agentDeadSQL+`)),
		       CASE WHEN a.id IS NOT NULL THEN `+agentDeadlineSQL+` END,
		       r.generation, r.status, r.provisioner, r.observed_generation, r.paused, r.hibernate
		  FROM resources r LEFT JOIN agents a ON a.id = r.lease_holder
		 WHERE r.id = $1`, id,
	).Scan(&holder, &l.Token, &expiresAt, &l.Live, &deadline, &l.Generation, &l.Status, &l.Provisioner,
		&l.ObservedGeneration, &l.Paused, &l.Hibernate)
	if errors.Is(err, sql.ErrNoRows) {
		return l, notFound(id)
	}
	if err != nil {
		return l, err
	}
	l.Holder = holder.String
	if expiresAt.Valid {
		if l.ExpiresAt, err = parseTime("lease_expires_at", expiresAt.String); err != nil {
			return l, err
		}
	}
	if deadline.Valid {
		if l.AgentDeadline, err = parseTime("agent deadline", deadline.String); err != nil {
			return l, err
		}
	}
	return l, nil
}
