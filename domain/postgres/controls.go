package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// The controls write one column each and leave the rest to the resources table's triggers
// (migration 0011), so that they behave as the same write in plain SQL does: the control
// event, the change log entry, the reset of the retry bookkeeping, a labels change's new
// generation. A control that changes nothing matches no row and records nothing.

// eventsChannel is the NOTIFY channel resource_events' trigger announces new events on.
const eventsChannel = "berth_resource_events"

// SetPaused pauses or resumes the resource.
func (s *State) SetPaused(ctx context.Context, id string, paused bool) (domain.Resource, error) {
	what := "pause"
	if !paused {
		what = "resume"
	}
	return s.control(ctx, id, what, `
		UPDATE resources SET paused = $2
		 WHERE id = $1 AND paused <> $2
		RETURNING `+resourceColumns, paused)
}

// SetHibernate asks for the resource to be hibernated or woken. The trigger refuses the
// change on a row being deleted; the same value again changes nothing, deleting or not.
func (s *State) SetHibernate(ctx context.Context, id string, hibernate bool) (domain.Resource, error) {
	what := "hibernate"
	if !hibernate {
		what = "wake"
	}
	r, err := s.control(ctx, id, what, `
		UPDATE resources SET hibernate = $2
		 WHERE id = $1 AND hibernate <> $2
		RETURNING `+resourceColumns, hibernate)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.ConstraintName == "resources_hibernate_not_deleting" {
		return domain.Resource{}, backend.HibernateWhileDeleting(id)
	}
	return r, err
}

// RequestRetry stamps retry_requested_at, which the trigger turns into a reset of the retry
// bookkeeping, a change log entry and a control event. The stamp moves forward on every
// call, even two within the clock's resolution, so every call is a request.
func (s *State) RequestRetry(ctx context.Context, id string) (domain.Resource, error) {
	return s.control(ctx, id, "retry", `
		UPDATE resources
		   SET retry_requested_at = greatest(now(), retry_requested_at + interval '1 microsecond')
		 WHERE id = $1
		RETURNING `+resourceColumns)
}

// SetLabels replaces the resource's labels; the trigger bumps the generation when they
// differ. A resource being deleted keeps its labels (a new generation would only hold up its
// deprovisioning): changing them gives an error wrapping domain.ErrConflict.
func (s *State) SetLabels(ctx context.Context, id string, labels map[string]string) (domain.Resource, error) {
	encoded, err := backend.EncodeLabels(labels)
	if err != nil {
		return domain.Resource{}, err
	}
	r, err := s.control(ctx, id, "label", `
		UPDATE resources SET labels = $2::jsonb
		 WHERE id = $1 AND labels <> $2::jsonb AND status <> 'deleting'
		RETURNING `+resourceColumns, encoded)
	if err == nil && r.Status == domain.StatusDeleting && !maps.Equal(r.Labels, labels) {
		return domain.Resource{}, backend.LabelsWhileDeleting(id)
	}
	return r, err
}

// ChangeLabels merges the change into the labels the row has in one UPDATE, so that
// concurrent changes of different keys all land; the trigger bumps the generation and
// records the control event as for SetLabels. The UPDATE matches no row when the change is
// refused or changes nothing: the row read after it says which (backend.LabelChange); should
// it say neither, the row changed in between and the UPDATE runs again.
func (s *State) ChangeLabels(ctx context.Context, id string, set map[string]string, remove []string) (domain.Resource, error) {
	if err := domain.CheckLabelChange(set, remove); err != nil {
		return domain.Resource{}, err
	}
	encoded, err := backend.EncodeLabels(set)
	if err != nil {
		return domain.Resource{}, err
	}
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	if remove == nil {
		remove = []string{}
	}
	for range labelChangeTries {
		r, err := scanResource(s.pool.QueryRow(ctx, changeLabelsSQL, uid, encoded, remove, domain.MaxLabels))
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return domain.Resource{}, fmt.Errorf("label resource %s: %w", id, describeDBError(err))
		}
		cur, err := s.GetResource(ctx, id)
		if err != nil {
			return domain.Resource{}, err
		}
		changes, err := backend.LabelChange(cur, set, remove)
		if err != nil {
			return domain.Resource{}, err
		}
		if !changes {
			return cur, nil
		}
	}
	return domain.Resource{}, fmt.Errorf("label resource %s: its labels kept changing under the write; try again: %w", id, domain.ErrConflict)
}

// labelChangeTries bounds ChangeLabels' writes of one change.
const labelChangeTries = 3

// changeLabelsSQL sets the labels $2 (a JSON object) of resource $1 and removes the keys $3,
// when it has every key of $3, is not being deleted, the labels change and there are at most
// $4 of them after.
const changeLabelsSQL = `
	UPDATE resources SET labels = (labels || $2::jsonb) - $3::text[]
	 WHERE id = $1 AND status <> 'deleting' AND labels ?& $3::text[]
	   AND labels <> ((labels || $2::jsonb) - $3::text[])
	   AND (SELECT count(*) FROM jsonb_object_keys((labels || $2::jsonb) - $3::text[])) <= $4
	RETURNING ` + resourceColumns

// control runs update, which writes row $1 (the resource) with args and returns it, or
// matches no row when the control changes nothing; the row is then read as it is.
func (s *State) control(ctx context.Context, id, what, update string, args ...any) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	r, err := scanResource(s.pool.QueryRow(ctx, update, append([]any{uid}, args...)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return s.GetResource(ctx, id)
	}
	if err != nil {
		return domain.Resource{}, fmt.Errorf("%s resource %s: %w", what, id, describeDBError(err))
	}
	return r, nil
}

// LatestEventSeq returns the highest event sequence number (0 when there are none).
func (s *State) LatestEventSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, backend.LatestEventSQL).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read latest event: %w", err)
	}
	return seq, nil
}

// EventsAfter returns up to limit events with Seq > after, in Seq order (limit <= 0: all).
func (s *State) EventsAfter(ctx context.Context, after int64, limit int) ([]domain.Event, error) {
	var limitArg *int
	if limit > 0 {
		limitArg = &limit
	}
	rows, err := s.pool.Query(ctx, `
		SELECT seq, resource_id::text, at, kind, status, message FROM resource_events
		 WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limitArg)
	if err != nil {
		return nil, fmt.Errorf("read events after %d: %w", after, err)
	}
	out, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("read events after %d: %w", after, err)
	}
	return out, nil
}

// scanEvent reads a row of seq, resource_id, at, kind, status, message.
func scanEvent(row pgx.CollectableRow) (domain.Event, error) {
	var e domain.Event
	err := row.Scan(&e.Seq, &e.ResourceID, &e.At, &e.Kind, &e.Status, &e.Message)
	return e, err
}

// ListenEvents takes a connection out of the pool for good and LISTENs on it for new events.
func (s *State) ListenEvents(ctx context.Context) (domain.ChangeListener, error) {
	return s.listen(ctx, eventsChannel, "listen for events")
}
