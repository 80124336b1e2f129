package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// missingChunk and reservationChunk bound the ids one statement of MissingResources and of
// GetReservations takes (as one JSON array); each id is an index lookup, so they only bound
// the parameter. They are those of the PostgreSQL store.
const (
	missingChunk     = 100000
	reservationChunk = 10000
)

// UnclaimedResources returns those of ids that need attention, are due and whose lease is
// free, expired or void, in the order given, in one statement that gets the ids as one
// JSON array.
func (s *State) UnclaimedResources(ctx context.Context, ids []string) ([]string, error) {
	stored := make([]string, 0, len(ids))
	for _, id := range ids {
		if u, err := uuidString(id); err == nil {
			stored = append(stored, u)
		}
	}
	if len(stored) == 0 {
		return nil, nil
	}
	what := fmt.Sprintf("look up %d resources left unclaimed", len(stored))
	rows, err := s.queryIDs(ctx, what, `
		SELECT resources.id FROM json_each($1) AS t JOIN resources ON resources.id = t.value
		 WHERE `+backend.NeedsAttentionSQL+`
		   AND (next_attempt_at IS NULL OR next_attempt_at <= `+nowSQL+`)
		   AND (lease_holder IS NULL OR lease_expires_at < `+nowSQL+`
		        OR EXISTS (SELECT 1 FROM agents a WHERE a.id = resources.lease_holder AND `+agentDeadSQL+`))
		 ORDER BY t.key`, stored)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// MissingResources returns the ids among ids that name no resource row, as given and in the
// order given: one statement per missingChunk ids, which get the ids as one JSON array and
// answer with the positions of the missing ones only.
func (s *State) MissingResources(ctx context.Context, ids []string) ([]string, error) {
	var missing []string
	for start := 0; start < len(ids); start += missingChunk {
		chunk := ids[start:min(start+missingChunk, len(ids))]
		gone := make([]bool, len(chunk))
		stored := make([]string, 0, len(chunk))
		at := make([]int, 0, len(chunk)) // at[k] is the chunk index of stored[k]
		for i, id := range chunk {
			u, err := uuidString(id)
			if err != nil {
				gone[i] = true
				continue
			}
			stored = append(stored, u)
			at = append(at, i)
		}
		if len(stored) > 0 {
			if err := s.markMissing(ctx, stored, at, gone); err != nil {
				return nil, err
			}
		}
		for i, id := range chunk {
			if gone[i] {
				missing = append(missing, id)
			}
		}
	}
	return missing, nil
}

// markMissing sets gone[at[k]] for each stored[k] (an id in stored form) without a row.
func (s *State) markMissing(ctx context.Context, stored []string, at []int, gone []bool) error {
	what := fmt.Sprintf("look up %d resources", len(stored))
	rows, err := s.queryIDs(ctx, what, `
		SELECT t.key FROM json_each($1) AS t
		 WHERE NOT EXISTS (SELECT 1 FROM resources r WHERE r.id = t.value)`, stored)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k int
		if err := rows.Scan(&k); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		gone[at[k]] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// GetReservations returns the provisioner's reservations of those of resourceIDs that hold
// one, ordered by resource: one statement per reservationChunk ids.
func (s *State) GetReservations(ctx context.Context, provisioner string, resourceIDs []string) ([]domain.Reservation, error) {
	stored := make([]string, 0, len(resourceIDs))
	for _, id := range resourceIDs {
		if u, err := uuidString(id); err == nil {
			stored = append(stored, u)
		}
	}
	// Sorted, so that the chunks' answers, each in order, are in order together.
	slices.Sort(stored)
	var out []domain.Reservation
	for start := 0; start < len(stored); start += reservationChunk {
		chunk := stored[start:min(start+reservationChunk, len(stored))]
		found, err := s.reservationsOf(ctx, provisioner, chunk)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// reservationsOf reads the provisioner's reservations of ids (in stored form).
func (s *State) reservationsOf(ctx context.Context, provisioner string, ids []string) ([]domain.Reservation, error) {
	what := fmt.Sprintf("read the reservations of %s for %d resources", provisioner, len(ids))
	rows, err := s.queryIDs(ctx, what, `
		SELECT provisioner, resource_id, owner, host, slots
		  FROM slot_reservations
		 WHERE provisioner = $2 AND resource_id IN (SELECT value FROM json_each($1))
		 ORDER BY resource_id`, ids, provisioner)
	if err != nil {
		return nil, err
	}
	out, err := collectRows(rows, scanReservation)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// queryIDs runs query with ids as its first parameter, one JSON array, and args after it.
func (s *State) queryIDs(ctx context.Context, what, query string, ids []string, args ...any) (*sql.Rows, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	rows, err := s.read.QueryContext(ctx, query, append([]any{string(list)}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return rows, nil
}
