package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// The controls write one column each and leave the rest to resources_after_update
// (migration 0011), so that they behave as the same write in plain SQL does: the control
// event, the change log entry, the reset of the retry bookkeeping, a labels change's new
// generation. A control that changes nothing matches no row and records nothing.

// SetPaused pauses or resumes the resource.
func (s *State) SetPaused(ctx context.Context, id string, paused bool) (domain.Resource, error) {
	what := "pause"
	if !paused {
		what = "resume"
	}
	return s.control(ctx, id, what, nil, `UPDATE resources SET paused = $2 WHERE id = $1 AND paused IS NOT $2`, paused)
}

// SetHibernate asks for the resource to be hibernated or woken. A change on a row being
// deleted is refused here, under the write lock, before the trigger would refuse it; the
// same value again changes nothing, deleting or not.
func (s *State) SetHibernate(ctx context.Context, id string, hibernate bool) (domain.Resource, error) {
	what := "hibernate"
	if !hibernate {
		what = "wake"
	}
	refuse := func(r domain.Resource) error {
		if r.Status == domain.StatusDeleting && r.Hibernate != hibernate {
			return backend.HibernateWhileDeleting(r.ID)
		}
		return nil
	}
	return s.control(ctx, id, what, refuse, `UPDATE resources SET hibernate = $2 WHERE id = $1 AND hibernate IS NOT $2`, hibernate)
}

// RequestRetry stamps retry_requested_at, which the trigger turns into a reset of the retry
// bookkeeping, a change log entry and a control event. The stamp moves forward on every
// call, by a millisecond when the clock has not, so every call is a request.
func (s *State) RequestRetry(ctx context.Context, id string) (domain.Resource, error) {
	return s.control(ctx, id, "retry", nil, `
		UPDATE resources
		   SET retry_requested_at = CASE WHEN `+nowSQL+` > coalesce(retry_requested_at, '') THEN `+nowSQL+`
		                                 ELSE strftime('%Y-%m-%dT%H:%M:%fZ', retry_requested_at, '+0.001 seconds') END
		 WHERE id = $1`)
}

// SetLabels replaces the resource's labels; the trigger bumps the generation when they
// differ. A resource being deleted keeps its labels (a new generation would only hold up its
// deprovisioning): changing them gives an error wrapping domain.ErrConflict.
func (s *State) SetLabels(ctx context.Context, id string, labels map[string]string) (domain.Resource, error) {
	encoded, err := backend.EncodeLabels(labels)
	if err != nil {
		return domain.Resource{}, err
	}
	refuse := func(r domain.Resource) error {
		if r.Status == domain.StatusDeleting && !maps.Equal(r.Labels, labels) {
			return backend.LabelsWhileDeleting(r.ID)
		}
		return nil
	}
	return s.control(ctx, id, "label", refuse, `
		UPDATE resources SET labels = $2
		 WHERE id = $1 AND labels IS NOT $2 AND json(labels) IS NOT json($2)`, encoded)
}

// ChangeLabels merges the change into the labels the row has in one UPDATE. The
// transaction holds the write lock, so the row read to decide the change (backend.LabelChange)
// is the row the UPDATE merges into: concurrent changes of different keys all land.
func (s *State) ChangeLabels(ctx context.Context, id string, set map[string]string, remove []string) (domain.Resource, error) {
	if err := domain.CheckLabelChange(set, remove); err != nil {
		return domain.Resource{}, err
	}
	encodedSet, err := backend.EncodeLabels(set)
	if err != nil {
		return domain.Resource{}, err
	}
	encodedRemove, err := json.Marshal(append([]string{}, remove...))
	if err != nil {
		return domain.Resource{}, err
	}
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	var r domain.Resource
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := readResource(ctx, tx, uid)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return err
		}
		r = cur
		changes, err := backend.LabelChange(cur, set, remove)
		if err != nil || !changes {
			return err
		}
		if _, err := tx.ExecContext(ctx, changeLabelsSQL, uid, encodedSet, string(encodedRemove)); err != nil {
			return describeDBError(err)
		}
		r, err = readResource(ctx, tx, uid)
		return err
	})
	if err != nil {
		if errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrConflict) || errors.As(err, new(*domain.FieldError)) {
			return domain.Resource{}, err
		}
		return domain.Resource{}, fmt.Errorf("label resource %s: %w", id, err)
	}
	return r, nil
}

// changeLabelsSQL sets the labels $2 (a JSON object of strings) of resource $1 and removes
// the keys $3 (a JSON array).
const changeLabelsSQL = `
	UPDATE resources
	   SET labels = (SELECT json_group_object(key, value) FROM json_each(json_patch(labels, $2))
	                  WHERE key NOT IN (SELECT value FROM json_each($3)))
	 WHERE id = $1`

// control runs update, which writes row $1 (the resource) with args, or matches no row when
// the control changes nothing, and returns the row as it then is. refuse, when set, is
// given the row as it was first and may refuse the control: the transaction holds the write
// lock, so the row is as refuse saw it when update runs.
func (s *State) control(ctx context.Context, id, what string, refuse func(domain.Resource) error, update string, args ...any) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	var r domain.Resource
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if refuse != nil {
			before, err := readResource(ctx, tx, uid)
			if errors.Is(err, sql.ErrNoRows) {
				return notFound(id)
			}
			if err != nil {
				return err
			}
			if err := refuse(before); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, update, append([]any{uid}, args...)...); err != nil {
			return describeDBError(err)
		}
		r, err = readResource(ctx, tx, uid)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		return err
	})
	switch {
	case errors.Is(err, domain.ErrNotFound), errors.Is(err, domain.ErrConflict):
		return domain.Resource{}, err
	case err != nil:
		return domain.Resource{}, fmt.Errorf("%s resource %s: %w", what, id, err)
	}
	return r, nil
}

// LatestEventSeq returns the highest event sequence number (0 when there are none).
func (s *State) LatestEventSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.read.QueryRowContext(ctx, backend.LatestEventSQL).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read latest event: %w", err)
	}
	return seq, nil
}

// EventsAfter returns up to limit events with Seq > after, in Seq order (limit <= 0: all).
func (s *State) EventsAfter(ctx context.Context, after int64, limit int) ([]domain.Event, error) {
	if limit <= 0 {
		limit = -1 // no limit
	}
	what := "read events after " + strconv.FormatInt(after, 10)
	rows, err := s.read.QueryContext(ctx, `
		SELECT seq, resource_id, at, kind, status, message FROM resource_events
		 WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := collectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// scanEvent reads a row of seq, resource_id, at, kind, status, message.
func scanEvent(row rowScanner) (domain.Event, error) {
	var (
		e  domain.Event
		at string
	)
	if err := row.Scan(&e.Seq, &e.ResourceID, &at, &e.Kind, &e.Status, &e.Message); err != nil {
		return e, err
	}
	var err error
	e.At, err = parseTime("at", at)
	return e, err
}

// ListenEvents returns a listener woken as ListenChanges' is, that wakes its caller only
// when resource_events has grown since the last wake-up.
func (s *State) ListenEvents(ctx context.Context) (domain.ChangeListener, error) {
	return s.listen(ctx, "listen for events", s.LatestEventSeq)
}
