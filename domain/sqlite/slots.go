package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// ReserveSlots records or resizes req's reservation on the host pick chooses. The transaction
// holds the database's write lock from its start, so reservations (of every provisioner, by
// this process and any other) are serialised and pick always sees every committed
// reservation, and no claim changes the resource's lease while its fence is checked (see
// domain.SlotStore). Errors from pick are returned wrapped (errors.Is still sees
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
	if req.Instant != nil {
		var raw rawResource
		err = s.inInstantTx(ctx, func(tx *sql.Tx, usage *usageMemo) error {
			var err error
			out, raw, err = s.reserveInstant(ctx, tx, usage, req, uid, pick)
			return err
		})
		if err == nil && req.Instant.Recorded != nil {
			*req.Instant.Recorded, err = raw.decode()
		}
		if err == nil && req.Instant.ReadyAt != nil {
			var readyAt *time.Time
			if readyAt, err = parseOptionalTime("ready_at", raw.ready); readyAt != nil {
				*req.Instant.ReadyAt = *readyAt
			}
		}
		if err != nil {
			return domain.Reservation{}, fmt.Errorf("reserve %d slots of %s for resource %s: %w", req.Slots, req.Provisioner, req.ResourceID, err)
		}
		return out, nil
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := checkSlotsFence(ctx, tx, uid, req.Lease, req.Checked); err != nil {
			return err
		}
		existing, err := scanReservation(tx.QueryRowContext(ctx, `
			SELECT provisioner, resource_id, owner, host, slots
			  FROM slot_reservations WHERE provisioner = $1 AND resource_id = $2`, req.Provisioner, uid))
		var current *domain.Reservation
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read the current reservation: %w", err)
		case existing.Slots == req.Slots:
			out = existing
			return nil
		default:
			current = &existing
		}
		usage, err := hostUsage(ctx, tx, req)
		if err != nil {
			return fmt.Errorf("read host usage: %w", err)
		}
		if current != nil {
			discountOwn(usage, existing, req.Owner)
		}
		host, err := pick(req, current, usage)
		if err != nil {
			return err
		}
		if host == "" {
			return fmt.Errorf("the host picker chose no host")
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (provisioner, resource_id) DO UPDATE
			   SET owner = excluded.owner, host = excluded.host, slots = excluded.slots, updated_at = `+nowSQL,
			req.Provisioner, uid, req.Owner, host, req.Slots); err != nil {
			return fmt.Errorf("record the reservation on %s: %w", host, describeDBError(err))
		}
		out = domain.Reservation{Provisioner: req.Provisioner, ResourceID: uid, Owner: req.Owner, Host: host, Slots: req.Slots}
		return nil
	})
	if err != nil {
		return domain.Reservation{}, fmt.Errorf("reserve %d slots of %s for resource %s: %w", req.Slots, req.Provisioner, req.ResourceID, err)
	}
	return out, nil
}

// hostUsage is the committed usage of every host of the provisioner, by host: one row per
// host, from the tables the reservations' triggers keep.
func hostUsage(ctx context.Context, tx *sql.Tx, req domain.SlotRequest) ([]domain.HostUsage, error) {
	rows, err := tx.QueryContext(ctx, backend.HostUsageSQL, req.Provisioner, req.Owner)
	if err != nil {
		return nil, err
	}
	return collectRows(rows, func(row rowScanner) (u domain.HostUsage, err error) {
		err = row.Scan(&u.Host, &u.UsedSlots, &u.OwnerResources)
		return u, err
	})
}

// discountOwn takes the resource's own reservation out of its owner's count on its host: pick
// is shown how many of the owner's other resources each host holds.
func discountOwn(usage []domain.HostUsage, own domain.Reservation, owner string) {
	if own.Owner != owner {
		return
	}
	for i := range usage {
		if usage[i].Host == own.Host {
			usage[i].OwnerResources--
		}
	}
}

// rebuildSlotUsage recomputes slot_host_usage and slot_owner_usage from slot_reservations,
// for a copy that wrote reservations with the triggers that keep them set aside (migration
// 0004 computes them the same way).
const rebuildSlotUsage = `
	DELETE FROM slot_host_usage;
	DELETE FROM slot_owner_usage;
	INSERT INTO slot_host_usage (provisioner, host, slots)
	SELECT provisioner, host, sum(slots) FROM slot_reservations GROUP BY provisioner, host;
	INSERT INTO slot_owner_usage (provisioner, owner, host, resources)
	SELECT provisioner, owner, host, count(*) FROM slot_reservations GROUP BY provisioner, owner, host;`

// ReleaseSlots removes the resource's reservation under lease (nil: none), in one
// transaction that checks the resource's lease first; a missing reservation is not an error.
func (s *State) ReleaseSlots(ctx context.Context, provisioner, resourceID string, lease *domain.Lease) error {
	uid, err := parseID(resourceID)
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := checkSlotsFence(ctx, tx, uid, lease, nil); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, backend.DeleteReservationSQL, provisioner, uid)
		return err
	})
	if err != nil {
		return fmt.Errorf("release slots of %s for resource %s: %w", provisioner, resourceID, err)
	}
	return nil
}

// checkSlotsFence reads the resource's lease and guards inside tx and says whether they
// refuse a slot write under lease (nil: none) or, under none, decided by the health check
// that read the row as checked (nil: none). A missing row refuses a write under a lease or
// a check (ErrNotFound) and allows one under neither.
func checkSlotsFence(ctx context.Context, tx *sql.Tx, id string, lease *domain.Lease, checked *domain.Checked) error {
	if lease != nil {
		// A write under a lease needs no more than the lease to be the row's (see
		// backend.Lease.SlotsError): the one-row read of it, and readLease only to explain
		// a refusal.
		var held bool
		err := tx.QueryRowContext(ctx, `
			SELECT lease_holder IS $2 AND lease_token = $3 FROM resources WHERE id = $1`,
			id, lease.Holder, lease.Token).Scan(&held)
		if err == nil && held {
			return nil
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read the resource's lease: %w", err)
		}
	}
	l, err := readLease(ctx, tx, id)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("read the resource's lease: %w", err)
	}
	return backend.SlotsFenceError(l, err, lease, checked)
}

// ListReservations returns the provisioner's reservations ordered by host, then resource.
func (s *State) ListReservations(ctx context.Context, provisioner string) ([]domain.Reservation, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT provisioner, resource_id, owner, host, slots
		  FROM slot_reservations WHERE provisioner = $1
		 ORDER BY host, resource_id`, provisioner)
	if err != nil {
		return nil, fmt.Errorf("list reservations of %s: %w", provisioner, err)
	}
	out, err := collectRows(rows, scanReservation)
	if err != nil {
		return nil, fmt.Errorf("list reservations of %s: %w", provisioner, err)
	}
	return out, nil
}

func scanReservation(row rowScanner) (domain.Reservation, error) {
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
	r, err := scanReservation(s.read.QueryRowContext(ctx, `
		SELECT provisioner, resource_id, owner, host, slots
		  FROM slot_reservations WHERE provisioner = $1 AND resource_id = $2`, provisioner, uid))
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Reservation{}, fmt.Errorf("reservation of %s for resource %s: %w", provisioner, resourceID, domain.ErrNotFound)
	}
	if err != nil {
		return domain.Reservation{}, fmt.Errorf("read reservation of %s for resource %s: %w", provisioner, resourceID, err)
	}
	return r, nil
}

// ReservedByHost returns what the provisioner's reservations hold on each host that holds any,
// ordered by host (backend.ReservedByHostSQL).
func (s *State) ReservedByHost(ctx context.Context, provisioner string) ([]domain.HostReservations, error) {
	rows, err := s.read.QueryContext(ctx, backend.ReservedByHostSQL, provisioner)
	if err != nil {
		return nil, fmt.Errorf("read the reservations of %s by host: %w", provisioner, err)
	}
	out, err := collectRows(rows, func(row rowScanner) (h domain.HostReservations, err error) {
		err = row.Scan(&h.Host, &h.Slots, &h.Resources)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the reservations of %s by host: %w", provisioner, err)
	}
	return out, nil
}

// OrphanedReservations returns up to limit of the provisioner's reservations whose resource
// row no longer exists and whose resource id sorts after after ("" for the first), ordered
// by resource: one anti-join, which hands the agent the orphans alone.
func (s *State) OrphanedReservations(ctx context.Context, provisioner, after string, limit int) ([]domain.Reservation, error) {
	if err := backend.CheckOrphanPage(limit); err != nil {
		return nil, err
	}
	if after != "" {
		stored, err := uuidString(after)
		if err != nil {
			return nil, backend.OrphanPageAfterError(after)
		}
		after = stored
	}
	rows, err := s.read.QueryContext(ctx, `
		SELECT s.provisioner, s.resource_id, s.owner, s.host, s.slots
		  FROM slot_reservations s
		 WHERE s.provisioner = $1 AND ($2 = '' OR s.resource_id > $2)
		   AND NOT EXISTS (SELECT 1 FROM resources r WHERE r.id = s.resource_id)
		 ORDER BY s.resource_id
		 LIMIT $3`, provisioner, after, limit)
	if err != nil {
		return nil, fmt.Errorf("find the orphaned reservations of %s: %w", provisioner, err)
	}
	out, err := collectRows(rows, scanReservation)
	if err != nil {
		return nil, fmt.Errorf("find the orphaned reservations of %s: %w", provisioner, err)
	}
	return out, nil
}
