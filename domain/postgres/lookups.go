package postgres

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// missingChunk bounds the ids one statement of MissingResources takes (an array parameter of
// 1.6 MB at most). The statement hash-joins its ids with the resources table when they are
// many, which reads the whole table: chunks of a fraction of it would read it once each.
const missingChunk = 100000

// reservationChunk bounds the ids one statement of GetReservations takes; each id is an index
// lookup, so the size only bounds the parameter.
const reservationChunk = 10000

// reservationsByIDSQL reads the reservations of provisioner $1 of the resources $2, one
// primary-key lookup per id. A plain "resource_id = ANY ($2)" is planned, in the generic plan
// the server caches after five runs, for the table's size when the plan was made: made while
// a new deployment's table is nearly empty, it scans the provisioner's whole host index and
// filters, and keeps doing so, each call reading every reservation, until the next analyze.
// The LIMIT keeps the lateral subquery from being flattened into a join the planner may hash.
const reservationsByIDSQL = `
	SELECT r.provisioner, r.resource_id::text, r.owner, r.host, r.slots
	  FROM unnest($2::uuid[]) AS ids(id),
	       LATERAL (SELECT * FROM slot_reservations s
	                 WHERE s.provisioner = $1 AND s.resource_id = ids.id LIMIT 1) AS r`

// unclaimedSQL reads those of the ids $1 that need attention, are due and whose lease is
// free, expired or void, in the order given, one primary-key lookup per id: as a join, the
// generic plan made on a small table read the whole key index once the table grew. OFFSET 0
// keeps the lateral subquery a lookup per id.
const unclaimedSQL = `
	SELECT u.id::text FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, n),
	       LATERAL (SELECT resources.id FROM resources
	                 WHERE resources.id = t.id AND ` + backend.NeedsAttentionSQL + `
	                   AND (next_attempt_at IS NULL OR next_attempt_at <= now())
	                   AND (lease_holder IS NULL OR lease_expires_at < now()
	                        OR EXISTS (SELECT 1 FROM agents a WHERE a.id = resources.lease_holder AND ` + agentDeadSQL + `))
	                OFFSET 0) AS u
	 ORDER BY t.n`

// UnclaimedResources returns those of ids that need attention, are due and whose lease is
// free, expired or void, in the order given, in one statement.
func (s *State) UnclaimedResources(ctx context.Context, ids []string) ([]string, error) {
	uids := make([]pgtype.UUID, 0, len(ids))
	for _, id := range ids {
		if uid, err := parseID(id); err == nil {
			uids = append(uids, uid)
		}
	}
	if len(uids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, unclaimedSQL, uids)
	if err != nil {
		return nil, fmt.Errorf("look up %d resources left unclaimed: %w", len(uids), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("look up %d resources left unclaimed: %w", len(uids), err)
	}
	return out, nil
}

// MissingResources returns the ids among ids that name no resource row, as given and in the
// order given: one statement per missingChunk ids, answering with the positions of the
// missing ones only.
func (s *State) MissingResources(ctx context.Context, ids []string) ([]string, error) {
	var missing []string
	for start := 0; start < len(ids); start += missingChunk {
		chunk := ids[start:min(start+missingChunk, len(ids))]
		gone := make([]bool, len(chunk))
		uids := make([]pgtype.UUID, 0, len(chunk))
		at := make([]int, 0, len(chunk)) // at[k] is the chunk index of uids[k]
		for i, id := range chunk {
			uid, err := parseID(id)
			if err != nil {
				gone[i] = true
				continue
			}
			uids = append(uids, uid)
			at = append(at, i)
		}
		if len(uids) > 0 {
			var positions []int64
			err := s.queryWhole(ctx, `
				SELECT t.n FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, n)
				 WHERE NOT EXISTS (SELECT 1 FROM resources r WHERE r.id = t.id)`, []any{uids}, func(rows pgx.Rows) (err error) {
				positions, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("look up %d resources: %w", len(uids), err)
			}
			for _, n := range positions {
				gone[at[n-1]] = true
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

// GetReservations returns the provisioner's reservations of those of resourceIDs that hold
// one, ordered by resource: one statement per reservationChunk ids.
func (s *State) GetReservations(ctx context.Context, provisioner string, resourceIDs []string) ([]domain.Reservation, error) {
	uids := make([]pgtype.UUID, 0, len(resourceIDs))
	for _, id := range resourceIDs {
		if uid, err := parseID(id); err == nil {
			uids = append(uids, uid)
		}
	}
	// Sorted, so that the chunks' answers, each in order, are in order together.
	slices.SortFunc(uids, func(a, b pgtype.UUID) int { return bytes.Compare(a.Bytes[:], b.Bytes[:]) })
	var out []domain.Reservation
	for start := 0; start < len(uids); start += reservationChunk {
		chunk := uids[start:min(start+reservationChunk, len(uids))]
		rows, err := s.pool.Query(ctx, reservationsByIDSQL+` ORDER BY r.resource_id`, provisioner, chunk)
		if err != nil {
			return nil, fmt.Errorf("read the reservations of %s for %d resources: %w", provisioner, len(chunk), err)
		}
		found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Reservation, error) {
			return scanReservation(row)
		})
		if err != nil {
			return nil, fmt.Errorf("read the reservations of %s for %d resources: %w", provisioner, len(chunk), err)
		}
		out = append(out, found...)
	}
	return out, nil
}
