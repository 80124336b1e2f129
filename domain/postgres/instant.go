package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// instantLanes is how many groups of one provisioner's one-transaction provisions may be in
// flight at once. Their rows are updated outside the provisioner's lock, so groups in
// flight together update rows in parallel and queue only for the reservations.
const instantLanes = 4

// instants returns the group a one-transaction provision of provisioner's joins: the first
// lane whose next group is not full yet. Under light load every call takes the first lane,
// so that groups stay large and one agent holds the provisioner's lock once per group; a
// lane spills into the next only once it has a full group waiting.
func (s *State) instants(provisioner string) *backend.Group[*reserveCall] {
	s.reserveMu.Lock()
	lanes, ok := s.instant[provisioner]
	if !ok {
		lanes = &instantGroups{}
		for i := range lanes.groups {
			lanes.groups[i] = backend.NewGroup(maxGroup, s.runInstants)
		}
		s.instant[provisioner] = lanes
	}
	s.reserveMu.Unlock()
	for _, g := range lanes.groups[:instantLanes-1] {
		if g.Queued() < maxGroup {
			return g
		}
	}
	return lanes.groups[instantLanes-1]
}

// instantGroups are the lanes of one provisioner's one-transaction provisions.
type instantGroups struct {
	groups [instantLanes]*backend.Group[*reserveCall]
}

// runInstants provisions a group of one provisioner's resources whole in one transaction
// (see instantGroupOn); when the transaction fails as a whole, each call runs alone.
func (s *State) runInstants(ctx context.Context, calls []*reserveCall) {
	slices.SortStableFunc(calls, func(a, b *reserveCall) int { return bytes.Compare(a.uid.Bytes[:], b.uid.Bytes[:]) })
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return
	}
	defer conn.Release()
	if err := instantGroupOn(ctx, conn.Conn(), calls, s.schema); err != nil {
		rollback(conn.Conn())
		for _, c := range calls {
			c.ran, c.out, c.err, c.instant, c.ready = false, domain.Reservation{}, nil, false, nil
		}
	}
}

// provisionAlone provisions call's resource whole in a transaction of its own. A host that
// filled meanwhile gives an error wrapping domain.ErrNotInstant: the caller goes the usual
// way, whose placement waits for room.
func (s *State) provisionAlone(ctx context.Context, call *reserveCall) (domain.Reservation, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return domain.Reservation{}, err
	}
	defer conn.Release()
	err = instantGroupOn(ctx, conn.Conn(), []*reserveCall{call}, s.schema)
	if err != nil {
		rollback(conn.Conn())
		if errors.Is(err, errHostFilled) {
			err = fmt.Errorf("%w: %w", err, domain.ErrNotInstant)
		}
		return domain.Reservation{}, err
	}
	return call.out, call.err
}

// errHostFilled is why a group's transaction is given up: a host picked before the
// provisioner's lock was taken has no room for what committed meanwhile.
var errHostFilled = errors.New("a host picked before the provisioner's lock filled meanwhile")

// instantGroupOn provisions the calls' resources whole in one transaction on conn, in three
// round trips, so that the rows' updates are not made under the provisioner's lock: the
// first locks every row that is untouched as read (FOR UPDATE, in id order; a row that is
// not is neither locked nor written) and reads its reservation and the usage of the hosts;
// each call is then picked a host in turn on the usage the picks before it left; the second
// records the rows ready, takes the provisioner's lock and reads the hosts' usage again,
// now with every committed reservation; if each picked host still has room for what it was
// picked for, the third writes the reservations and commits. Otherwise the transaction is
// given up whole (errHostFilled), and the caller rolls it back. A call whose row is not
// untouched, or that finds no room, writes nothing and gets its error.
func instantGroupOn(ctx context.Context, conn *pgx.Conn, calls []*reserveCall, schema int) error {
	provisioner := calls[0].req.Provisioner
	group, uids, owners := distinct(calls)
	usage := groupUsage{used: make(map[string]int), owned: make(map[ownerHost]int)}
	reserved := make(map[[16]byte]domain.Reservation)
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	for _, c := range group {
		queueInstantFence(b, c, schema)
	}
	queueReservations(b, provisioner, uids, reserved)
	queueUsage(b, provisioner, owners, usage)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}

	b = &pgx.Batch{}
	var picked []*reserveCall
	for _, c := range group {
		in := c.req.Instant
		if _, found := reserved[c.uid.Bytes]; !c.instant || found {
			c.err = domain.ErrNotInstant
			continue
		}
		host, err := c.pick(c.req, nil, usage.view(c.req.Owner, nil))
		switch {
		case err != nil:
			c.err = err
			continue
		case host == "":
			c.err = errors.New("the host picker chose no host")
			continue
		}
		c.out = domain.Reservation{Provisioner: provisioner, ResourceID: c.req.ResourceID, Owner: c.req.Owner, Host: host, Slots: c.req.Slots}
		rec, err := in.Ready(c.out)
		if err == nil {
			c.ready, err = instantReadyArgs(c.uid, in, rec)
		}
		if err != nil {
			c.err = err
			continue
		}
		usage.move(c.req, nil, host)
		picked = append(picked, c)
		b.Queue(instantReadySQL, c.ready...).QueryRow(func(row pgx.Row) error {
			r, err := scanResource(row)
			if err != nil {
				return fmt.Errorf("record resource %s ready: %w", c.req.ResourceID, describeDBError(err))
			}
			if in.Recorded != nil {
				*in.Recorded = r
			}
			return nil
		})
	}
	if len(picked) == 0 {
		_, err := conn.Exec(ctx, `ROLLBACK`)
		markRan(group)
		return err
	}
	committed := make(map[string]int)
	b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('berth.slots:' || $1, 0))`, provisioner)
	queueHostUsage(b, provisioner, committed)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	for _, c := range picked {
		committed[c.out.Host] += c.req.Slots
		if committed[c.out.Host] > c.req.Instant.HostSlots(c.out.Host) {
			return errHostFilled
		}
	}

	b = &pgx.Batch{}
	for _, c := range picked {
		b.Queue(upsertReservationSQL, provisioner, c.uid, c.req.Owner, c.out.Host, c.req.Slots).QueryRow(func(row pgx.Row) error {
			var err error
			if c.out, err = scanReservation(row); err != nil {
				return fmt.Errorf("record the reservation on %s: %w", c.out.Host, describeDBError(err))
			}
			return nil
		})
	}
	b.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	markRan(group)
	return nil
}

// markRan marks the calls of group as run in it.
func markRan(group []*reserveCall) {
	for _, c := range group {
		c.ran = true
	}
}

// instantFenceSQL locks row $1 for update when it is untouched as the caller read it (see
// domain.InstantProvision), and returns true; a row that is not is neither locked nor
// returned. Untouched: pending since created, at generation $4 and of owner $5, of the
// types $3, with the provisioner $2 or none, no live lease, no retry due, neither paused nor
// to be hibernated, an owner without a quota, and a schema no newer than version $6. A
// lease whose holder is a dead agent is left to the claim, which reports the takeover. The
// conditions are the statement's WHERE, so that a row another agent holds is not locked:
// its holder's reservation, under the provisioner's lock, waits for none of these.
const instantFenceSQL = `
	SELECT true FROM resources
	 WHERE id = $1
	   AND status = 'pending' AND reason = 'Created' AND next_attempt_at IS NULL
	   AND NOT paused AND NOT hibernate
	   AND provisioner IN ('', $2) AND type = ANY ($3::text[])
	   AND generation = $4 AND owner = $5
	   AND (lease_holder IS NULL OR lease_expires_at < now())
	   AND NOT EXISTS (SELECT 1 FROM owner_quotas q WHERE q.owner = resources.owner)
	   AND NOT EXISTS (` + backend.SchemaNewerSQL + `$6)
	   FOR UPDATE`

// queueInstantFence queues instantFenceSQL for c, whose request has Instant, and sets
// c.instant to its answer.
func queueInstantFence(b *pgx.Batch, c *reserveCall, schema int) {
	in := c.req.Instant
	b.Queue(instantFenceSQL, c.uid, in.Provisioner, backend.InstantTypes(in), in.Generation, c.req.Owner, schema).QueryRow(func(row pgx.Row) error {
		c.instant = false
		err := row.Scan(&c.instant)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read resource %s: %w", c.req.ResourceID, err)
		}
		return nil
	})
}

// instantReadySQL records row $1, locked by instantFenceSQL in the same transaction, ready:
// as the claim that starts provisioning and the ready record that releases its lease would
// together, in one update of the row. The lease token moves on, so that a write under any
// earlier lease is refused. ready_at is the update's own time, not the transaction's start:
// the transaction began before the row was locked and its host picked. The steps passed on the way ($7 statuses, $8 messages, in order)
// are inserted before the update's own status event, which the resources table's trigger
// writes at the end of the statement.
const instantReadySQL = `
	WITH updated AS (
	UPDATE resources
	   SET status = 'ready',
	       status_message = $2,
	       reason = 'Available',
	       waiting_since = NULL,
	       last_attempt_at = now(),
	       provisioner = $3,
	       state = $4,
	       config = $5,
	       observed_generation = generation,
	       attempts = 0,
	       next_attempt_at = NULL,
	       last_error = '',
	       ready_at = coalesce(ready_at, clock_timestamp()),
	       lease_holder = NULL,
	       lease_expires_at = NULL,
	       lease_token = lease_token + 1,
	       admitted_provisioner = $3,
	       admitted_units = $6
	 WHERE id = $1
	RETURNING ` + resourceColumns + `
	), passed AS (
	INSERT INTO resource_events (resource_id, kind, status, message)
	SELECT $1, 'status', step.status, step.message
	  FROM updated, unnest($7::text[], $8::text[]) WITH ORDINALITY AS step(status, message, n)
	 ORDER BY step.n
	)
	SELECT * FROM updated`

// instantReadyArgs are instantReadySQL's arguments for resource uid made ready by in with
// rec.
func instantReadyArgs(uid pgtype.UUID, in *domain.InstantProvision, rec domain.ReadyRecord) ([]any, error) {
	if rec.State == nil || rec.Config == nil {
		return nil, fmt.Errorf("the broker reported no state or no config for the resource ready")
	}
	statuses, messages := backend.InstantSteps(in)
	return []any{uid, domain.ReadyMessage(in.Generation, rec.Notice), in.Provisioner, rec.State, rec.Config, in.Units,
		statuses, messages}, nil
}
