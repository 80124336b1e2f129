package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// resourceColumns is the select list scanResource reads, in order.
const resourceColumns = `id::text, type, name, owner, provisioner, args, generation, observed_generation,
	status, status_message, state, config, attempts, next_attempt_at, last_error,
	lease_token, created_at, updated_at, ready_at, unhealthy_since,
	labels, paused, hibernate, retry_requested_at, status_changed_at, coalesce(lease_holder, ''), lease_expires_at,
	reason, waiting_since, last_attempt_at`

// scanResource reads one row of resourceColumns. Its JSON columns are decoded one by one
// after the scan, so a column Berth cannot read (written by another client) marks the row
// unreadable (domain.Resource.Unreadable) instead of failing the read. Its times are given
// in UTC, as the SQLite store gives them.
func scanResource(row pgx.Row) (domain.Resource, error) {
	var (
		r                           domain.Resource
		args, state, config, labels []byte
	)
	err := row.Scan(&r.ID, &r.Type, &r.Name, &r.Owner, &r.Provisioner, &args, &r.Generation,
		&r.ObservedGeneration, &r.Status, &r.StatusMessage, &state, &config, &r.Attempts,
		&r.NextAttemptAt, &r.LastError, &r.LeaseToken, &r.CreatedAt, &r.UpdatedAt, &r.ReadyAt, &r.UnhealthySince,
		&labels, &r.Paused, &r.Hibernate, &r.RetryRequestedAt, &r.StatusChangedAt, &r.LeaseHolder, &r.LeaseExpiresAt,
		&r.Reason, &r.WaitingSince, &r.LastAttemptAt)
	if err != nil {
		return r, err
	}
	decodeResourceColumns(&r, args, state, config, labels)
	return r, nil
}

// decodeResourceColumns decodes a row's JSON columns into r, marking those Berth cannot read,
// and gives its times in UTC.
func decodeResourceColumns(r *domain.Resource, args, state, config, labels []byte) {
	domain.DecodeResourceJSON(r, args, state, config)
	backend.DecodeLabels(r, labels)
	r.CreatedAt, r.UpdatedAt, r.StatusChangedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC(), r.StatusChangedAt.UTC()
	for _, t := range []**time.Time{&r.NextAttemptAt, &r.ReadyAt, &r.UnhealthySince, &r.RetryRequestedAt, &r.LeaseExpiresAt, &r.WaitingSince, &r.LastAttemptAt} {
		if *t != nil {
			utc := (**t).UTC()
			*t = &utc
		}
	}
}

// CreateResource inserts a pending resource at generation 1.
func (s *State) CreateResource(ctx context.Context, nr domain.NewResource) (domain.Resource, error) {
	args := nr.Args
	if args == nil {
		args = map[string]any{}
	}
	labels, err := backend.EncodeLabels(nr.Labels)
	if err != nil {
		return domain.Resource{}, err
	}
	r, err := scanResource(s.pool.QueryRow(ctx, `
		INSERT INTO resources (type, name, owner, provisioner, args, labels)
		VALUES ($1, $2, $3, $4, $5, $6)
		RETURNING `+resourceColumns,
		string(nr.Type), nr.Name, nr.Owner, nr.Provisioner, args, labels))
	if err != nil {
		if isUniqueViolation(err) {
			return domain.Resource{}, fmt.Errorf("create resource: owner %q already has a %s resource named %q (names are case-insensitive): %w",
				nr.Owner, nr.Type, nr.Name, domain.ErrAlreadyExists)
		}
		return domain.Resource{}, fmt.Errorf("create resource %q: %w", nr.Name, describeDBError(err))
	}
	return r, nil
}

// ListResources returns the resources f matches, oldest first. A selector is applied to
// the rows read, before the limit (see backend.ListQuery).
func (s *State) ListResources(ctx context.Context, f domain.ListFilter) ([]domain.Resource, error) {
	query, args := backend.ListQuery(resourceColumns, f, "id")
	out := []domain.Resource{}
	err := s.queryWhole(ctx, query, args, func(rows pgx.Rows) error {
		for rows.Next() {
			r, err := scanResource(rows)
			if err != nil {
				return err
			}
			if out = backend.AppendSelected(out, r, f); backend.ListFull(out, f) {
				return nil
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list resources: %w", err)
	}
	return out, nil
}

// UpdateResourceArgs replaces the resource's args; the trigger bumps generation when they
// differ. A resource being deleted gives domain.ErrStale.
func (s *State) UpdateResourceArgs(ctx context.Context, id string, args map[string]any) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	if args == nil {
		args = map[string]any{}
	}
	r, err := scanResource(s.pool.QueryRow(ctx, `
		UPDATE resources SET args = $2
		 WHERE id = $1 AND status <> 'deleting'
		RETURNING `+resourceColumns, uid, args))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return domain.Resource{}, fmt.Errorf("update args of resource %s: %w", id, describeDBError(err))
	}
	if _, err := s.GetResource(ctx, id); err != nil {
		return domain.Resource{}, err
	}
	return domain.Resource{}, fmt.Errorf("update args of resource %s: it is being deleted: %w", id, domain.ErrStale)
}

// RequestDelete moves the resource to deleting; a resource already deleting is returned as is.
func (s *State) RequestDelete(ctx context.Context, id string) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	r, err := scanResource(s.pool.QueryRow(ctx, `
		UPDATE resources
		   SET status = 'deleting', status_message = 'delete requested', reason = 'DeleteRequested', waiting_since = NULL,
		       next_attempt_at = NULL, attempts = 0
		 WHERE id = $1 AND status <> 'deleting'
		RETURNING `+resourceColumns, uid))
	if errors.Is(err, pgx.ErrNoRows) {
		return s.GetResource(ctx, id)
	}
	if err != nil {
		return domain.Resource{}, fmt.Errorf("request delete of resource %s: %w", id, describeDBError(err))
	}
	return r, nil
}

// parseID checks id is a UUID; one that is not names no resource.
func parseID(id string) (pgtype.UUID, error) {
	var uid pgtype.UUID
	if err := uid.Scan(id); err != nil {
		return uid, fmt.Errorf("resource %q: %w (resource ids are UUIDs)", id, domain.ErrNotFound)
	}
	return uid, nil
}

func notFound(id string) error {
	return fmt.Errorf("resource %s: %w", id, domain.ErrNotFound)
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// checkMessages explains each check constraint of the schema as a field error.
var checkMessages = backend.CheckMessages(nil)

// describeDBError turns a check violation into a *domain.FieldError naming the column, and a
// write the database refused to the caller's role (a client's write of a column only the
// agent writes, row security) into an error wrapping domain.ErrForbidden with the database's
// explanation; other errors are returned unchanged.
func describeDBError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "23514":
		if fe, ok := checkMessages[pgErr.ConstraintName]; ok {
			return &fe
		}
		return fmt.Errorf("violates %s: %w", pgErr.ConstraintName, err)
	case "42501":
		msg := pgErr.Message
		if pgErr.Hint != "" {
			msg += " (" + pgErr.Hint + ")"
		}
		return fmt.Errorf("%s: %w", msg, domain.ErrForbidden)
	}
	return err
}
