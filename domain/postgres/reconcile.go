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
	return s.attention(ctx, "list resources needing attention", `
		SELECT id::text, owner, next_attempt_at FROM resources
		 WHERE `+backend.NeedsAttentionSQL+`
		   AND id > $1
		 ORDER BY id
		 LIMIT $2`, after, limit)
}

// attention runs query, which reads resources' id, owner and next_attempt_at, and returns
// them as a list of resources needing attention; what says what it lists in its errors.
func (s *State) attention(ctx context.Context, what, query string, args ...any) ([]domain.Attention, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Attention, error) {
		var a domain.Attention
		err := row.Scan(&a.ID, &a.Owner, &a.NotBefore)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
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
func (s *State) ClaimResource(ctx context.Context, id, holder string, ttl time.Duration) (domain.Claim, error) {
	return s.claim(ctx, id, holder, ttl, nil)
}

// ClaimAndStart takes or renews holder's lease like ClaimResource and, in the same statement,
// starts provisioning a row nothing has been done to yet (see domain.ReconcileStore). The row
// is locked first and the start decided on the version locked, so a change committed
// meanwhile (a delete request, new args) is what the decision sees.
func (s *State) ClaimAndStart(ctx context.Context, id, holder string, ttl time.Duration, start domain.ProvisioningStart) (domain.Claim, error) {
	if err := backend.CheckStart(id, start); err != nil {
		return domain.Claim{}, err
	}
	return s.claim(ctx, id, holder, ttl, &start)
}

// claim is ClaimResource, and ClaimAndStart when start is set. The row is locked and its
// previous lease read in the statement that takes it, so the takeover it reports is of the
// lease the claim replaced. The statement runs in a group with the claims of concurrent
// reconciles (claimCall); one that took no row is decided alone, as before groups.
func (s *State) claim(ctx context.Context, id, holder string, ttl time.Duration, start *domain.ProvisioningStart) (domain.Claim, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Claim{}, err
	}
	if err := backend.CheckClaim(id, holder, ttl); err != nil {
		return domain.Claim{}, err
	}
	call := &claimCall{uid: uid, holder: holder, args: claimArgs(uid, holder, ttl, start, s.schema)}
	if err := s.claims.Do(ctx, call); err != nil {
		return domain.Claim{}, fmt.Errorf("claim resource %s: %w", id, err)
	}
	switch {
	case call.claimed:
		return call.claim, nil
	case call.lostRow:
		return domain.Claim{}, fmt.Errorf("claim resource %s: %w", id, notFound(id))
	case call.leaseRead && call.lease.Live && call.lease.Holder != holder:
		return domain.Claim{}, fmt.Errorf("claim resource %s: %w", id, call.lease.HeldError())
	}
	return s.claimAlone(ctx, call, id, holder, call.leaseRead || !call.ran)
}

// claimAlone decides a claim whose statement took no row (or did not run, when tryFirst):
// the lease is held, or the row is gone, or another claim had it locked and freed it since.
func (s *State) claimAlone(ctx context.Context, call *claimCall, id, holder string, tryFirst bool) (domain.Claim, error) {
	for attempt := 0; ; attempt++ {
		if tryFirst || attempt > 0 {
			err := scanClaim(s.pool.QueryRow(ctx, claimSQL, call.args...), call)
			if err == nil {
				return call.claim, nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return domain.Claim{}, fmt.Errorf("claim resource %s: %w", id, err)
			}
		}
		l, err := s.readLease(ctx, call.uid)
		if err != nil {
			return domain.Claim{}, fmt.Errorf("claim resource %s: %w", id, err)
		}
		if err := s.schemaError(ctx); err != nil {
			return domain.Claim{}, fmt.Errorf("claim resource %s: %w", id, err)
		}
		if (l.Live && l.Holder != holder) || attempt+1 == claimAttempts {
			return domain.Claim{}, fmt.Errorf("claim resource %s: %w", id, l.HeldError())
		}
	}
}

// claimSQL takes the lease of row $1 for holder $2 for $3 seconds when it is free and the
// schema is no newer than version $8, and starts provisioning it when $7 says to and it is
// untouched (reason Created, no retry due; of the types $5, with the provisioner $4 or none,
// neither paused nor to be hibernated; the message is $6 and the generation).
const claimSQL = `
	WITH claimed AS (
		SELECT resources.id AS claimed_id,
		       $7 AND status = 'pending' AND reason = 'Created' AND next_attempt_at IS NULL
		       AND NOT paused AND NOT hibernate
		       AND provisioner IN ('', $4) AND type = ANY ($5::text[]) AS start,
		       lease_holder AS previous_holder,
		       coalesce((extract(epoch FROM now() - least(coalesce(a.heartbeat_at, lease_expires_at), lease_expires_at)) * 1000000)::bigint, 0) AS waited_us
		  FROM resources LEFT JOIN agents a ON a.id = resources.lease_holder
		 WHERE resources.id = $1 AND ` + leaseFreeSQL + `
		   AND NOT EXISTS (` + backend.SchemaNewerSQL + `$8)
		   FOR UPDATE OF resources
	)
	UPDATE resources
	   SET lease_holder = $2, lease_expires_at = now() + $3::float8 * interval '1 second',
	       lease_token = lease_token + 1,
	       status = CASE WHEN start THEN 'provisioning' ELSE status END,
	       status_message = CASE WHEN start THEN $6 || generation ELSE status_message END,
	       reason = CASE WHEN start THEN 'Provisioning' ELSE reason END,
	       provisioner = CASE WHEN start THEN $4 ELSE provisioner END
	  FROM claimed
	 WHERE id = claimed_id
	RETURNING ` + resourceColumns + `, start, previous_holder, waited_us, coalesce(admitted_provisioner, ''), coalesce(admitted_units, 0),
	          NOT EXISTS (SELECT 1 FROM owner_quotas q WHERE q.owner = resources.owner)`

// claimArgs are claimSQL's arguments for a build that knows schema version schema.
func claimArgs(uid pgtype.UUID, holder string, ttl time.Duration, start *domain.ProvisioningStart, schema int) []any {
	doStart, startWith := start != nil, domain.ProvisioningStart{}
	if doStart {
		startWith = *start
	}
	return []any{uid, holder, ttl.Seconds(), startWith.Provisioner, backend.StartTypes(startWith), domain.ProvisioningMessagePrefix, doStart, schema}
}

// scanClaim reads the row claimSQL returns into call's claim.
func scanClaim(row pgx.Row, call *claimCall) error {
	var (
		c        domain.Claim
		previous *string
		waitedUS int64
		err      error
	)
	c.Resource, err = scanResource(rowWith{row, []any{&c.Started, &previous, &waitedUS,
		&c.Admission.Provisioner, &c.Admission.Units, &c.Admission.NoQuota}})
	if err != nil {
		return err
	}
	c.Lease = domain.Lease{Holder: call.holder, Token: c.Resource.LeaseToken}
	c.Takeover = backend.LeaseTakeover(call.holder, previous, time.Duration(waitedUS)*time.Microsecond)
	call.claim, call.claimed = c, true
	return nil
}

// rowWith is a row whose last columns, after those its scanner reads, go into extra.
type rowWith struct {
	pgx.Row
	extra []any
}

func (r rowWith) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// ReleaseResource clears lease; it does nothing when lease is not the row's.
func (s *State) ReleaseResource(ctx context.Context, id string, lease domain.Lease) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `
		UPDATE resources SET lease_holder = NULL, lease_expires_at = NULL
		 WHERE id = $1 AND lease_holder = $2 AND lease_token = $3`, uid, lease.Holder, lease.Token)
	if err != nil {
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
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			WITH released AS (
				UPDATE resources SET lease_holder = NULL, lease_expires_at = NULL
				 WHERE id = $1 AND lease_holder = $2 AND lease_token = $3
				RETURNING id, owner
			)
			INSERT INTO change_log (resource_id, owner) SELECT id, owner FROM released`, uid, lease.Holder, lease.Token)
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

// RecordProgress applies u while lease is the row's live lease, the row is at u.Generation and not
// being deleted (unless u moves it to deleting). Pinning a provisioner applies only while the
// row's provisioner is unset or already the same; a client's different choice gives ErrStale.
// With u.ReleaseLease the same statement clears the lease. The statement runs in a group
// with the records of concurrent reconciles (progressCall).
func (s *State) RecordProgress(ctx context.Context, id string, lease domain.Lease, u domain.ProgressUpdate) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	if err := backend.CheckProgress(u); err != nil {
		return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, err)
	}
	call := &progressCall{uid: uid, args: progressArgs(uid, lease, u, s.schema)}
	if err := s.progress.Do(ctx, call); err != nil {
		return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, err)
	}
	if !call.ran {
		call.row, call.err = scanResource(s.pool.QueryRow(ctx, progressSQL, call.args...))
	}
	if call.err == nil {
		return call.row, nil
	}
	if !errors.Is(call.err, pgx.ErrNoRows) {
		return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, describeDBError(call.err))
	}
	if err := s.schemaError(ctx); err != nil {
		return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, err)
	}
	l, err := s.readLease(ctx, uid)
	if err != nil {
		return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, err)
	}
	return domain.Resource{}, fmt.Errorf("record progress of resource %s: %w", id, l.ProgressError(lease, u))
}

// progressSQL is RecordProgress's statement; progressArgs are its arguments. It applies
// only while the schema is no newer than version $17. It writes the reason $18 with the
// status, keeps waiting_since while the reason stays one of domain.WaitingReasons (now when it becomes so, NULL otherwise) and stamps last_attempt_at, both on the database clock. The update's
// own status event is written by the resources table's trigger, which fires at the end of
// the statement: a passed step inserted by the statement comes before it.
const progressSQL = `
	WITH updated AS (
	UPDATE resources
	   SET status = $4,
	       status_message = $5,
	       reason = $18,
	       waiting_since = CASE WHEN $18 NOT IN ('WaitingForCapacity', 'ResizeWaitingForCapacity', 'QuotaExceeded', 'BrokerUnavailable') THEN NULL
	                            WHEN reason = $18 THEN waiting_since ELSE now() END,
	       last_attempt_at = now(),
	       provisioner = CASE WHEN $6 = '' THEN provisioner ELSE $6 END,
	       state = coalesce($7, state),
	       config = coalesce($8, config),
	       observed_generation = coalesce($9, observed_generation),
	       attempts = $10,
	       next_attempt_at = CASE WHEN $11::bigint > 0 THEN now() + $11::bigint * interval '1 millisecond' END,
	       last_error = $12,
	       ready_at = CASE WHEN $4 = 'ready' THEN coalesce(ready_at, now()) ELSE ready_at END,
	       lease_holder = CASE WHEN $13 THEN NULL ELSE lease_holder END,
	       lease_expires_at = CASE WHEN $13 THEN NULL ELSE lease_expires_at END,
	       admitted_provisioner = coalesce($19::text, admitted_provisioner),
	       admitted_units = coalesce($20::bigint, admitted_units)
	 WHERE id = $1
	   AND lease_holder = $2 AND lease_token = $14 AND lease_expires_at >= now()
	   AND generation = $3
	   AND (status <> 'deleting' OR $4 = 'deleting')
	   AND ($6 = '' OR provisioner IN ('', $6))
	   AND NOT EXISTS (` + backend.SchemaNewerSQL + `$17)
	RETURNING ` + resourceColumns + `
	), passed AS (
	INSERT INTO resource_events (resource_id, kind, status, message)
	SELECT $1, 'status', $15, $16 FROM updated WHERE $16 <> ''
	)
	SELECT * FROM updated`

func progressArgs(uid pgtype.UUID, lease domain.Lease, u domain.ProgressUpdate, schema int) []any {
	var passed domain.StatusStep
	if u.Passed != nil {
		passed = *u.Passed
	}
	var admittedProvisioner *string
	var admittedUnits *int64
	if u.Admission != nil {
		admittedProvisioner, admittedUnits = &u.Admission.Provisioner, &u.Admission.Units
	}
	return []any{uid, lease.Holder, u.Generation, string(u.Status), u.StatusMessage, u.Provisioner,
		nilMap(u.State), nilMap(u.Config), u.ObservedGeneration,
		u.Attempts, u.RetryIn.Milliseconds(), u.LastError, u.ReleaseLease, lease.Token,
		string(passed.Status), passed.Message, schema, string(u.Reason), admittedProvisioner, admittedUnits}
}

// FinalizeDelete removes a deleting resource's row while lease is its live lease and the
// schema is no newer than this build knows. A row already gone gives ErrNotFound (the
// caller's work is done); one no longer deleting gives ErrStale.
func (s *State) FinalizeDelete(ctx context.Context, id string, lease domain.Lease) error {
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
			   AND lease_holder = $2 AND lease_token = $3 AND lease_expires_at >= now()
			   AND NOT EXISTS (`+backend.SchemaNewerSQL+`$4)`, uid, lease.Holder, lease.Token, s.schema)
		deleted = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("finalize delete of resource %s: %w", id, err)
	}
	if deleted == 1 {
		return nil
	}
	if err := s.schemaError(ctx); err != nil {
		return fmt.Errorf("finalize delete of resource %s: %w", id, err)
	}
	l, err := s.readLease(ctx, uid)
	if err != nil {
		return fmt.Errorf("finalize delete of resource %s: %w", id, err)
	}
	return fmt.Errorf("finalize delete of resource %s: %w", id, l.FinalizeError(lease))
}

// readLease reads the row's lease and guards, and when the holder is a registered agent
// whether that agent is live and until when; a missing row gives ErrNotFound.
func (s *State) readLease(ctx context.Context, uid pgtype.UUID) (backend.Lease, error) {
	return scanLease(s.pool.QueryRow(ctx, `SELECT `+leaseColumns+` `+leaseFrom, uid), uid)
}

// leaseColumns and leaseFrom select what scanLease reads of the resource row $1.
const (
	leaseColumns = `r.lease_holder, r.lease_token, r.lease_expires_at,
		       coalesce(r.lease_expires_at >= now(), false) AND (a.id IS NULL OR NOT (` + agentDeadSQL + `)),
		       a.heartbeat_at + a.ttl_ms * interval '1 millisecond',
		       r.generation, r.status, r.provisioner, r.observed_generation, r.paused, r.hibernate`
	leaseFrom = `FROM resources r LEFT JOIN agents a ON a.id = r.lease_holder WHERE r.id = $1`
)

// scanLease reads a row of leaseColumns; no row gives ErrNotFound.
func scanLease(row pgx.Row, uid pgtype.UUID) (backend.Lease, error) {
	var (
		l         backend.Lease
		holder    *string
		expiresAt *time.Time
		deadline  *time.Time
	)
	err := row.Scan(&holder, &l.Token, &expiresAt, &l.Live, &deadline, &l.Generation, &l.Status, &l.Provisioner,
		&l.ObservedGeneration, &l.Paused, &l.Hibernate)
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
