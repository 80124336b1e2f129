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

// ReserveSlots records or resizes req's reservation on the host pick chooses. pick is shown
// the usage committed when the transaction read it, and the reservation is written only while
// its host, with every reservation committed by then, holds no more than req.HostSlots gives
// it (hostRoomSQL); when another reservation filled the host first, the transaction is rolled
// back and made again on the new usage, up to maxRoomTries times. Errors from pick are
// returned wrapped (errors.Is still sees domain.ErrNoCapacity).
//
// It takes two round trips: the first opens the transaction, locks the resource row against
// a claim (FOR SHARE) and reads its lease, the resource's reservation and the usage of the
// provisioner's hosts (one row per host, from slot_host_usage and slot_owner_usage, which
// the reservations' trigger keeps); the second writes the reservation, checks its host's
// room and commits. A lease that refuses the write (see domain.SlotStore) rolls the
// transaction back before pick is called. No lock is held across the provisioner: a
// reservation waits only for one of another transaction on the same host, from that one's
// write to its commit.
//
// Concurrent reservations of one provisioner share that transaction (runReservations), so
// that under load the round trips are paid per group, not per reservation. A group that
// fails as a whole runs each reservation alone, as described above.
func (s *State) ReserveSlots(ctx context.Context, req domain.SlotRequest, pick domain.PickHost) (domain.Reservation, error) {
	if err := backend.CheckSlotRequest(req); err != nil {
		return domain.Reservation{}, err
	}
	uid, err := parseID(req.ResourceID)
	if err != nil {
		return domain.Reservation{}, err
	}
	call := &reserveCall{req: req, uid: uid, pick: pick}
	switch {
	case req.Instant != nil:
		err = s.instants(req.Provisioner).Do(ctx, call)
		if err == nil && !call.ran {
			call.out, call.err = s.provisionAlone(ctx, call)
		}
	default:
		s.forgetUsage(req.Provisioner)
		err = s.reservations(req.Provisioner).Do(ctx, call)
		if err == nil && !call.ran {
			call.out, call.err = s.reserveSlots(ctx, req, uid, pick)
		}
	}
	if err == nil {
		err = call.err
	}
	if err != nil {
		return domain.Reservation{}, fmt.Errorf("reserve %d slots of %s for resource %s: %w", req.Slots, req.Provisioner, req.ResourceID, err)
	}
	return call.out, nil
}

func (s *State) reserveSlots(ctx context.Context, req domain.SlotRequest, uid pgtype.UUID, pick domain.PickHost) (domain.Reservation, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return domain.Reservation{}, err
	}
	defer conn.Release()
	for try := 1; ; try++ {
		out, err := reserveOn(ctx, conn.Conn(), req, uid, pick)
		if err == nil {
			return out, nil
		}
		rollback(conn.Conn())
		if !errors.Is(err, errHostFilled) || try == maxRoomTries {
			return domain.Reservation{}, err
		}
	}
}

// reserveOn runs ReserveSlots's transaction on conn; on an error the caller rolls it back.
func reserveOn(ctx context.Context, conn *pgx.Conn, req domain.SlotRequest, uid pgtype.UUID, pick domain.PickHost) (domain.Reservation, error) {
	var (
		existing domain.Reservation
		found    bool
		usage    []domain.HostUsage
		fenceErr error
	)
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	queueFence(b, uid, req.Lease, req.Checked, &fenceErr)
	b.Queue(`
		SELECT provisioner, resource_id::text, owner, host, slots
		  FROM slot_reservations WHERE provisioner = $1 AND resource_id = $2`, req.Provisioner, uid,
	).QueryRow(func(row pgx.Row) error {
		var err error
		existing, err = scanReservation(row)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("read the current reservation: %w", err)
		}
		found = true
		return nil
	})
	b.Queue(backend.HostUsageSQL, req.Provisioner, req.Owner).Query(func(rows pgx.Rows) error {
		var err error
		usage, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.HostUsage, error) {
			var u domain.HostUsage
			err := row.Scan(&u.Host, &u.UsedSlots, &u.OwnerResources)
			return u, err
		})
		if err != nil {
			return fmt.Errorf("read host usage: %w", err)
		}
		return nil
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return domain.Reservation{}, err
	}
	if fenceErr != nil {
		return domain.Reservation{}, fenceErr
	}
	if found && existing.Slots == req.Slots {
		if _, err := conn.Exec(ctx, `COMMIT`); err != nil {
			return domain.Reservation{}, err
		}
		return existing, nil
	}
	var current *domain.Reservation
	if found {
		current = &existing
		discountOwn(usage, existing, req.Owner)
	}
	host, err := pick(req, current, usage)
	if err != nil {
		return domain.Reservation{}, err
	}
	if host == "" {
		return domain.Reservation{}, fmt.Errorf("the host picker chose no host")
	}
	var out domain.Reservation
	added := newHostsAdded()
	added.write(req, current, host)
	b = &pgx.Batch{}
	b.Queue(upsertReservationSQL, req.Provisioner, uid, req.Owner, host, req.Slots).QueryRow(func(row pgx.Row) error {
		var err error
		if out, err = scanReservation(row); err != nil {
			return fmt.Errorf("record the reservation on %s: %w", host, describeDBError(err))
		}
		return nil
	})
	added.queueCheck(b, req.Provisioner)
	b.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return domain.Reservation{}, roomRefusal(err)
	}
	return out, nil
}

// upsertReservationSQL records reservation ($1 provisioner, $2 resource, $3 owner, $4 host,
// $5 slots), or moves or resizes the resource's one, and returns it.
const upsertReservationSQL = `
	INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
	VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT (provisioner, resource_id) DO UPDATE
	   SET owner = EXCLUDED.owner, host = EXCLUDED.host, slots = EXCLUDED.slots, updated_at = now()
	RETURNING provisioner, resource_id::text, owner, host, slots`

// queueFence queues the read, under a row lock that keeps claims and every other writer off
// the resource until the transaction ends, of the resource's lease and guards, and sets
// *refused when they refuse a slot write under lease (nil: none) or, under none, decided by
// the health check that read the row as checked (nil: none). A missing row refuses a write
// under a lease or a check (ErrNotFound) and allows one under neither.
func queueFence(b *pgx.Batch, uid pgtype.UUID, lease *domain.Lease, checked *domain.Checked, refused *error) {
	b.Queue(`SELECT `+leaseColumns+` `+leaseFrom+` FOR SHARE OF r`, uid).QueryRow(func(row pgx.Row) error {
		l, err := scanLease(row, uid)
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
			return fmt.Errorf("read the resource's lease: %w", err)
		}
		*refused = backend.SlotsFenceError(l, err, lease, checked)
		return nil
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

// rollbackTimeout bounds the rollback of a failed reservation; a connection whose rollback
// fails is closed by the pool, which ends the transaction too.
const rollbackTimeout = 5 * time.Second

// rollback ends the transaction open on conn, if any.
func rollback(conn *pgx.Conn) {
	if conn.IsClosed() || conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	_, _ = conn.Exec(ctx, `ROLLBACK`)
}

// ReleaseSlots removes the resource's reservation under lease (nil: none), in one
// transaction that locks the resource row against a claim and checks its lease first; a
// missing reservation is not an error.
func (s *State) ReleaseSlots(ctx context.Context, provisioner, resourceID string, lease *domain.Lease) error {
	uid, err := parseID(resourceID)
	if err != nil {
		return err
	}
	s.forgetUsage(provisioner)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var refused error
		b := &pgx.Batch{}
		queueFence(b, uid, lease, nil, &refused)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if refused != nil {
			return refused
		}
		_, err := tx.Exec(ctx, backend.DeleteReservationSQL, provisioner, uid)
		return err
	})
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

// ReservedByHost returns what the provisioner's reservations hold on each host that holds any,
// ordered by host (backend.ReservedByHostSQL).
func (s *State) ReservedByHost(ctx context.Context, provisioner string) ([]domain.HostReservations, error) {
	rows, err := s.pool.Query(ctx, backend.ReservedByHostSQL, provisioner)
	if err != nil {
		return nil, fmt.Errorf("read the reservations of %s by host: %w", provisioner, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (h domain.HostReservations, err error) {
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
	var from pgtype.UUID // NULL: from the first
	if after != "" {
		uid, err := parseID(after)
		if err != nil {
			return nil, backend.OrphanPageAfterError(after)
		}
		from = uid
	}
	rows, err := s.pool.Query(ctx, `
		SELECT s.provisioner, s.resource_id::text, s.owner, s.host, s.slots
		  FROM slot_reservations s
		 WHERE s.provisioner = $1 AND ($2::uuid IS NULL OR s.resource_id > $2::uuid)
		   AND NOT EXISTS (SELECT 1 FROM resources r WHERE r.id = s.resource_id)
		 ORDER BY s.resource_id
		 LIMIT $3`, provisioner, from, limit)
	if err != nil {
		return nil, fmt.Errorf("find the orphaned reservations of %s: %w", provisioner, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Reservation, error) {
		return scanReservation(row)
	})
	if err != nil {
		return nil, fmt.Errorf("find the orphaned reservations of %s: %w", provisioner, err)
	}
	return out, nil
}
