package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// ReserveSlots records or resizes req's reservation on the host pick chooses. Reservations of
// one provisioner are serialised by a transaction-scoped advisory lock, so pick always sees
// every committed reservation. Errors from pick are returned wrapped (errors.Is still sees
// domain.ErrNoCapacity).
func (s *State) ReserveSlots(ctx context.Context, req domain.SlotRequest, pick domain.PickHost) (domain.Reservation, error) {
	if err := backend.CheckSlotRequest(req); err != nil {
		return domain.Reservation{}, err
	}
	uid, err := parseID(req.ResourceID)
	if err != nil {
		return domain.Reservation{}, err
	}
	var out domain.Reservation
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('berth.slots:' || $1, 0))`, req.Provisioner); err != nil {
			return fmt.Errorf("lock the provisioner's reservations: %w", err)
		}
		existing, err := scanReservation(tx.QueryRow(ctx, `
			SELECT provisioner, resource_id::text, owner, host, slots
			  FROM slot_reservations WHERE provisioner = $1 AND resource_id = $2`, req.Provisioner, uid))
		var current *domain.Reservation
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read the current reservation: %w", err)
		case existing.Slots == req.Slots:
			out = existing
			return nil
		default:
			current = &existing
		}
		rows, err := tx.Query(ctx, `
			SELECT host, sum(slots)::int, (count(*) FILTER (WHERE owner = $2 AND resource_id <> $3))::int
			  FROM slot_reservations WHERE provisioner = $1
			 GROUP BY host ORDER BY host`, req.Provisioner, req.Owner, uid)
		if err != nil {
			return fmt.Errorf("read host usage: %w", err)
		}
		usage, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.HostUsage, error) {
			var u domain.HostUsage
			err := row.Scan(&u.Host, &u.UsedSlots, &u.OwnerResources)
			return u, err
		})
		if err != nil {
			return fmt.Errorf("read host usage: %w", err)
		}
		host, err := pick(req, current, usage)
		if err != nil {
			return err
		}
		if host == "" {
			return fmt.Errorf("the host picker chose no host")
		}
		out, err = scanReservation(tx.QueryRow(ctx, `
			INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (provisioner, resource_id) DO UPDATE
			   SET owner = EXCLUDED.owner, host = EXCLUDED.host, slots = EXCLUDED.slots, updated_at = now()
			RETURNING provisioner, resource_id::text, owner, host, slots`,
			req.Provisioner, uid, req.Owner, host, req.Slots))
		if err != nil {
			return fmt.Errorf("record the reservation on %s: %w", host, describeDBError(err))
		}
		return nil
	})
	if err != nil {
		return domain.Reservation{}, fmt.Errorf("reserve %d slots of %s for resource %s: %w", req.Slots, req.Provisioner, req.ResourceID, err)
	}
	return out, nil
}

// ReleaseSlots removes the resource's reservation; a missing one is not an error.
func (s *State) ReleaseSlots(ctx context.Context, provisioner, resourceID string) error {
	uid, err := parseID(resourceID)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `DELETE FROM slot_reservations WHERE provisioner = $1 AND resource_id = $2`, provisioner, uid)
	if err != nil {
		return fmt.Errorf("release slots of %s for resource %s: %w", provisioner, resourceID, err)
	}
	return nil
}

// ListReservations returns the provisioner's reservations ordered by host, then resource.
func (s *State) ListReservations(ctx context.Context, provisioner string) ([]domain.Reservation, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT provisioner, resource_id::text, owner, host, slots
		  FROM slot_reservations WHERE provisioner = $1
		 ORDER BY host, resource_id`, provisioner)
	if err != nil {
		return nil, fmt.Errorf("list reservations of %s: %w", provisioner, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Reservation, error) {
		return scanReservation(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list reservations of %s: %w", provisioner, err)
	}
	return out, nil
}

func scanReservation(row pgx.Row) (domain.Reservation, error) {
	var r domain.Reservation
	err := row.Scan(&r.Provisioner, &r.ResourceID, &r.Owner, &r.Host, &r.Slots)
	return r, err
}

// GetReservation returns the resource's reservation with the provisioner, or an error wrapping
// domain.ErrNotFound.
func (s *State) GetReservation(ctx context.Context, provisioner, resourceID string) (domain.Reservation, error) {
	uid, err := parseID(resourceID)
	if err != nil {
		return domain.Reservation{}, err
	}
	r, err := scanReservation(s.pool.QueryRow(ctx, `
		SELECT provisioner, resource_id::text, owner, host, slots
		  FROM slot_reservations WHERE provisioner = $1 AND resource_id = $2`, provisioner, uid))
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Reservation{}, fmt.Errorf("reservation of %s for resource %s: %w", provisioner, resourceID, domain.ErrNotFound)
	}
	if err != nil {
		return domain.Reservation{}, fmt.Errorf("read reservation of %s for resource %s: %w", provisioner, resourceID, err)
	}
	return r, nil
}
