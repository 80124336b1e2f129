package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// resourceColumns is the select list scanResource reads, in order.
const resourceColumns = `id, type, name, owner, provisioner, args, generation, observed_generation,
	status, status_message, state, config, attempts, next_attempt_at, last_error,
	lease_token, created_at, updated_at, ready_at, unhealthy_since,
	labels, paused, hibernate, retry_requested_at, status_changed_at, coalesce(lease_holder, ''), lease_expires_at,
	reason, waiting_since, last_attempt_at`

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface {
	Scan(dest ...any) error
}

// collectRows reads every row of rows with scan and closes rows, as pgx.CollectRows does.
func collectRows[T any](rows *sql.Rows, scan func(rowScanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// scanResource reads one row of resourceColumns. Its JSON columns are decoded one by one,
// so a column Berth cannot read (written by another client) marks the row unreadable
// (domain.Resource.Unreadable) instead of failing the read.
func scanResource(row rowScanner) (domain.Resource, error) {
	raw, err := scanRawResource(row)
	if err != nil {
		return domain.Resource{}, err
	}
	return raw.decode()
}

// rawResource is a row of resourceColumns as read, its JSON and time columns not yet
// decoded: a write transaction reads its row so, and decodes it once it has committed, so
// the decoding does not hold up the writes that share its commit.
type rawResource struct {
	r                             domain.Resource
	args, state, config, labels   string
	created, updated, changed     string
	next, ready, unhealthy, retry sql.NullString
	leaseExpires                  sql.NullString
	waitingSince, lastAttempt     sql.NullString
}

func scanRawResource(row rowScanner) (rawResource, error) {
	var raw rawResource
	r := &raw.r
	err := row.Scan(&r.ID, &r.Type, &r.Name, &r.Owner, &r.Provisioner, &raw.args, &r.Generation,
		&r.ObservedGeneration, &r.Status, &r.StatusMessage, &raw.state, &raw.config, &r.Attempts,
		&raw.next, &r.LastError, &r.LeaseToken, &raw.created, &raw.updated, &raw.ready, &raw.unhealthy,
		&raw.labels, &r.Paused, &r.Hibernate, &raw.retry, &raw.changed, &r.LeaseHolder, &raw.leaseExpires,
		&r.Reason, &raw.waitingSince, &raw.lastAttempt)
	return raw, err
}

// decode returns the resource, its JSON columns decoded as scanResource says.
func (raw rawResource) decode() (domain.Resource, error) {
	r := raw.r
	var err error
	domain.DecodeResourceJSON(&r, []byte(raw.args), []byte(raw.state), []byte(raw.config))
	backend.DecodeLabels(&r, []byte(raw.labels))
	if r.CreatedAt, err = parseTime("created_at", raw.created); err != nil {
		return r, err
	}
	if r.UpdatedAt, err = parseTime("updated_at", raw.updated); err != nil {
		return r, err
	}
	if r.NextAttemptAt, err = parseOptionalTime("next_attempt_at", raw.next); err != nil {
		return r, err
	}
	if r.ReadyAt, err = parseOptionalTime("ready_at", raw.ready); err != nil {
		return r, err
	}
	if r.UnhealthySince, err = parseOptionalTime("unhealthy_since", raw.unhealthy); err != nil {
		return r, err
	}
	if r.RetryRequestedAt, err = parseOptionalTime("retry_requested_at", raw.retry); err != nil {
		return r, err
	}
	if r.StatusChangedAt, err = parseTime("status_changed_at", raw.changed); err != nil {
		return r, err
	}
	if r.WaitingSince, err = parseOptionalTime("waiting_since", raw.waitingSince); err != nil {
		return r, err
	}
	if r.LastAttemptAt, err = parseOptionalTime("last_attempt_at", raw.lastAttempt); err != nil {
		return r, err
	}
	r.LeaseExpiresAt, err = parseOptionalTime("lease_expires_at", raw.leaseExpires)
	return r, err
}

// queryer is what reads a resource: the read pool, or a write transaction reading its own
// writes.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readResource reads the row id (in stored form); a missing row gives sql.ErrNoRows.
func readResource(ctx context.Context, q queryer, id string) (domain.Resource, error) {
	return scanResource(q.QueryRowContext(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = $1`, id))
}

// CreateResource inserts a pending resource at generation 1.
func (s *State) CreateResource(ctx context.Context, nr domain.NewResource) (domain.Resource, error) {
	args, err := encodeObject("args", nr.Args)
	if err != nil {
		return domain.Resource{}, err
	}
	labels, err := backend.EncodeLabels(nr.Labels)
	if err != nil {
		return domain.Resource{}, err
	}
	id := uuid.NewString()
	var r domain.Resource
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO resources (id, type, name, owner, provisioner, args, labels)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			id, string(nr.Type), nr.Name, nr.Owner, nr.Provisioner, args, labels); err != nil {
			return err
		}
		r, err = readResource(ctx, tx, id)
		return err
	})
	if err != nil {
		if isUniqueViolation(err) {
			return domain.Resource{}, fmt.Errorf("create resource: owner %q already has a %s resource named %q (names are case-insensitive): %w",
				nr.Owner, nr.Type, nr.Name, domain.ErrAlreadyExists)
		}
		return domain.Resource{}, fmt.Errorf("create resource %q: %w", nr.Name, describeDBError(err))
	}
	return r, nil
}

// GetResource returns the resource or an error wrapping domain.ErrNotFound.
func (s *State) GetResource(ctx context.Context, id string) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	r, err := readResource(ctx, s.read, uid)
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Resource{}, notFound(id)
	}
	if err != nil {
		return domain.Resource{}, fmt.Errorf("get resource %s: %w", id, err)
	}
	return r, nil
}

// ListResources returns the resources f matches, oldest first (rows created in the same
// millisecond in the order they were inserted). A selector is applied to the rows read,
// before the limit (see backend.ListQuery).
func (s *State) ListResources(ctx context.Context, f domain.ListFilter) ([]domain.Resource, error) {
	query, args := backend.ListQuery(resourceColumns, f, "rowid")
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list resources: %w", err)
	}
	defer rows.Close()
	var out []domain.Resource
	for rows.Next() {
		r, err := scanResource(rows)
		if err != nil {
			return nil, fmt.Errorf("list resources: %w", err)
		}
		if out = backend.AppendSelected(out, r, f); backend.ListFull(out, f) {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list resources: %w", err)
	}
	return out, nil
}

// queryResources runs a query selecting resourceColumns on the read pool.
func (s *State) queryResources(ctx context.Context, query string, args ...any) ([]domain.Resource, error) {
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return collectRows(rows, scanResource)
}

// UpdateResourceArgs replaces the resource's args; the trigger bumps generation when they
// differ. A resource being deleted gives domain.ErrStale.
func (s *State) UpdateResourceArgs(ctx context.Context, id string, args map[string]any) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	encoded, err := encodeObject("args", args)
	if err != nil {
		return domain.Resource{}, err
	}
	var r domain.Resource
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE resources SET args = $2 WHERE id = $1 AND status <> 'deleting'`, uid, encoded)
		if err != nil {
			return describeDBError(err)
		}
		updated, err := res.RowsAffected()
		if err != nil {
			return err
		}
		r, err = readResource(ctx, tx, uid)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return notFound(id)
		case err != nil:
			return err
		case updated == 0:
			return fmt.Errorf("it is being deleted: %w", domain.ErrStale)
		}
		return nil
	})
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return domain.Resource{}, err
	case err != nil:
		return domain.Resource{}, fmt.Errorf("update args of resource %s: %w", id, err)
	}
	return r, nil
}

// RequestDelete moves the resource to deleting; a resource already deleting is returned as is.
func (s *State) RequestDelete(ctx context.Context, id string) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	var r domain.Resource
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			UPDATE resources
			   SET status = 'deleting', status_message = 'delete requested', reason = 'DeleteRequested', waiting_since = NULL,
			       next_attempt_at = NULL, attempts = 0,
			       `+statusChangedSQL("'deleting'")+`
			 WHERE id = $1 AND status <> 'deleting'`, uid); err != nil {
			return err
		}
		r, err = readResource(ctx, tx, uid)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		return err
	})
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return domain.Resource{}, err
	case err != nil:
		return domain.Resource{}, fmt.Errorf("request delete of resource %s: %w", id, err)
	}
	return r, nil
}

// uuidString returns id in canonical (lowercase, hyphenated) form.
func uuidString(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}
