package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// maxGroup bounds the calls of one group, so that a long queue cannot hold the first of them
// back without end.
const maxGroup = 64

// ownersUsageSQL reads provisioner $1's usage by host of the owners $2, one index lookup per
// owner: see reservationsByIDSQL for why not "owner = ANY ($2)". OFFSET 0 keeps the lateral
// subquery a lookup per owner.
const ownersUsageSQL = `
	SELECT u.owner, u.host, u.resources
	  FROM unnest($2::text[]) AS owners(owner),
	       LATERAL (SELECT * FROM slot_owner_usage s
	                 WHERE s.provisioner = $1 AND s.owner = owners.owner OFFSET 0) AS u`

// claimCall is one claim in a group: its statement's arguments, and what the statement got.
type claimCall struct {
	uid     pgtype.UUID
	holder  string
	args    []any // claimSQL's
	ran     bool  // the statement ran in the group; else the caller runs it alone
	claimed bool  // the statement took the row
	claim   domain.Claim
	// lease is the row's lease, read right after the group when the statement took no row
	// (leaseRead); lostRow says the row is gone.
	lease     backend.Lease
	leaseRead bool
	lostRow   bool
}

// progressCall is one progress record in a group.
type progressCall struct {
	uid  pgtype.UUID
	args []any // progressSQL's
	ran  bool  // the statement ran in the group; else the caller runs it alone
	row  domain.Resource
	err  error // the statement's; pgx.ErrNoRows when it applied to no row
}

// runClaims runs the claims' statements in one pipeline (see runPipeline).
func (s *State) runClaims(ctx context.Context, calls []*claimCall) {
	slices.SortStableFunc(calls, func(a, b *claimCall) int { return bytes.Compare(a.uid.Bytes[:], b.uid.Bytes[:]) })
	b := &pgx.Batch{}
	for _, c := range calls {
		b.Queue(claimSQL, c.args...).QueryRow(func(row pgx.Row) error {
			if err := scanClaim(row, c); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			return nil
		})
	}
	if !s.runPipeline(ctx, b) {
		for _, c := range calls {
			c.claimed, c.claim = false, domain.Claim{}
		}
		return
	}
	// The leases of the rows not taken, read in one more round trip: most were taken by
	// another agent, whose lease says so, and the caller needs no statement of its own.
	b = &pgx.Batch{}
	for _, c := range calls {
		c.ran = true
		if c.claimed {
			continue
		}
		b.Queue(`SELECT `+leaseColumns+` `+leaseFrom, c.uid).QueryRow(func(row pgx.Row) error {
			var err error
			c.lease, err = scanLease(row, c.uid)
			switch {
			case errors.Is(err, domain.ErrNotFound):
				c.leaseRead, c.lostRow = true, true
			case err == nil:
				c.leaseRead = true
			}
			return nil
		})
	}
	if b.Len() > 0 {
		_ = s.runPipeline(ctx, b)
	}
}

// runProgress runs the records' statements in one pipeline (see runPipeline).
func (s *State) runProgress(ctx context.Context, calls []*progressCall) {
	slices.SortStableFunc(calls, func(a, b *progressCall) int { return bytes.Compare(a.uid.Bytes[:], b.uid.Bytes[:]) })
	b := &pgx.Batch{}
	for _, c := range calls {
		b.Queue(progressSQL, c.args...).QueryRow(func(row pgx.Row) error {
			c.row, c.err = scanResource(row)
			if c.err != nil && !errors.Is(c.err, pgx.ErrNoRows) {
				return c.err
			}
			return nil
		})
	}
	if s.runPipeline(ctx, b) {
		for _, c := range calls {
			c.ran = true
		}
	}
}

// runPipeline sends b's statements in one round trip. A pipeline is one implicit
// transaction, so they share one commit. They are queued in resource id order, as every
// group's are, so that two agents' groups lock rows in the same order and cannot deadlock.
// It reports whether the pipeline committed: a statement's error aborts the transaction and
// every statement with it, and then nothing of it is written and each call runs alone, to
// get its own outcome.
func (s *State) runPipeline(ctx context.Context, b *pgx.Batch) bool {
	return s.pool.SendBatch(ctx, b).Close() == nil
}

// reserveCall is one ReserveSlots in a group of the same provisioner's reservations.
type reserveCall struct {
	req  domain.SlotRequest
	uid  pgtype.UUID
	pick domain.PickHost
	ran  bool // the call ran in the group; else the caller runs it alone
	out  domain.Reservation
	err  error

	fenceErr error // the lease refuses the write
	// instant says, for a request with Instant, that the row is untouched as read.
	instant bool
	// ready is, for a request with Instant, its row's ready record once picked.
	ready instantReady
}

// reservations returns the group of provisioner's reservations.
func (s *State) reservations(provisioner string) *backend.Group[*reserveCall] {
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	g, ok := s.reserve[provisioner]
	if !ok {
		g = backend.NewGroup(maxGroup, s.runReservations)
		s.reserve[provisioner] = g
	}
	return g
}

// runReservations makes a group of one provisioner's reservations in one transaction: the
// first round trip reads every resource's lease (FOR SHARE, in id order) and reservation and
// the usage of the hosts; then each call is picked a host in turn on the usage the picks
// before it left, and the second round trip writes the reservations (in host order, so that
// two groups update the hosts' usage rows in the same order), checks the room of every host
// they add slots to (hostRoomSQL) and commits. A call the lease refuses, or that finds no
// room, writes nothing and gets its error; when the transaction fails as a whole (a host
// that filled meanwhile included), each call runs alone.
func (s *State) runReservations(ctx context.Context, calls []*reserveCall) {
	slices.SortStableFunc(calls, func(a, b *reserveCall) int { return bytes.Compare(a.uid.Bytes[:], b.uid.Bytes[:]) })
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return
	}
	defer conn.Release()
	if err := reserveGroupOn(ctx, conn.Conn(), calls); err != nil {
		rollback(conn.Conn())
		for _, c := range calls {
			c.ran, c.out, c.err = false, domain.Reservation{}, nil
		}
	}
}

func reserveGroupOn(ctx context.Context, conn *pgx.Conn, calls []*reserveCall) error {
	provisioner := calls[0].req.Provisioner
	group, uids, owners := distinct(calls)
	usage := groupUsage{used: make(map[string]int), owned: make(map[ownerHost]int)}
	existing := make(map[[16]byte]domain.Reservation)
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	for _, c := range group {
		queueFence(b, c.uid, c.req.Lease, c.req.Checked, &c.fenceErr)
	}
	queueReservations(b, provisioner, uids, existing)
	queueUsage(b, provisioner, owners, usage)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	type write struct {
		c    *reserveCall
		host string
	}
	var writes []write
	added := newHostsAdded()
	for _, c := range group {
		if c.fenceErr != nil {
			c.err = c.fenceErr
			continue
		}
		old, found := existing[c.uid.Bytes]
		if found && old.Slots == c.req.Slots {
			c.out = old
			continue
		}
		var current *domain.Reservation
		if found {
			current = &old
		}
		host, err := c.pick(c.req, current, usage.view(c.req.Owner, current))
		switch {
		case err != nil:
			c.err = err
			continue
		case host == "":
			c.err = errors.New("the host picker chose no host")
			continue
		}
		usage.move(c.req, current, host)
		added.write(c.req, current, host)
		writes = append(writes, write{c, host})
	}
	slices.SortStableFunc(writes, func(a, b write) int { return strings.Compare(a.host, b.host) })
	b = &pgx.Batch{}
	for _, w := range writes {
		c, host := w.c, w.host
		b.Queue(upsertReservationSQL, provisioner, c.uid, c.req.Owner, host, c.req.Slots).QueryRow(func(row pgx.Row) error {
			var err error
			if c.out, err = scanReservation(row); err != nil {
				return fmt.Errorf("record the reservation on %s: %w", host, describeDBError(err))
			}
			return nil
		})
	}
	added.queueCheck(b, provisioner)
	b.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	for _, c := range group {
		c.ran = true
	}
	return nil
}

// distinct returns the calls of a group of reservations with one call per resource, their
// resource ids and their owners, each once: a resource's second call runs alone, after the
// group, and each owner's usage is read once.
func distinct(calls []*reserveCall) (group []*reserveCall, uids []pgtype.UUID, owners []string) {
	seen := make(map[[16]byte]bool)
	for _, c := range calls {
		if seen[c.uid.Bytes] {
			continue
		}
		seen[c.uid.Bytes] = true
		group = append(group, c)
		uids = append(uids, c.uid)
		if !slices.Contains(owners, c.req.Owner) {
			owners = append(owners, c.req.Owner)
		}
	}
	return group, uids, owners
}

// queueReservations queues the read of provisioner's reservations of the resources uids into
// existing, by resource.
func queueReservations(b *pgx.Batch, provisioner string, uids []pgtype.UUID, existing map[[16]byte]domain.Reservation) {
	b.Queue(reservationsByIDSQL, provisioner, uids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			res, err := scanReservation(rows)
			if err != nil {
				return fmt.Errorf("read the current reservations: %w", err)
			}
			uid, err := parseID(res.ResourceID)
			if err != nil {
				return err
			}
			existing[uid.Bytes] = res
		}
		return rows.Err()
	})
}

// queueUsage queues the reads of the slots reserved on each of provisioner's hosts and of
// how many of each of owners' resources each host holds, into usage.
func queueUsage(b *pgx.Batch, provisioner string, owners []string, usage groupUsage) {
	queueHostUsage(b, provisioner, usage.used)
	b.Queue(ownersUsageSQL, provisioner, owners).Query(func(rows pgx.Rows) error {
		var (
			key       ownerHost
			resources int
		)
		_, err := pgx.ForEachRow(rows, []any{&key.owner, &key.host, &resources}, func() error {
			usage.owned[key] = resources
			return nil
		})
		return err
	})
}

// queueHostUsage queues the read of the slots reserved on each of provisioner's hosts into
// used.
func queueHostUsage(b *pgx.Batch, provisioner string, used map[string]int) {
	b.Queue(hostUsageSQL, provisioner).Query(func(rows pgx.Rows) error {
		var (
			host  string
			slots int
		)
		_, err := pgx.ForEachRow(rows, []any{&host, &slots}, func() error {
			used[host] = slots
			return nil
		})
		return err
	})
}

// hostUsageSQL reads the slots reserved on each of provisioner $1's hosts.
const hostUsageSQL = `SELECT host, slots FROM slot_host_usage WHERE provisioner = $1`

// ownerHost is an owner's share of a host.
type ownerHost struct{ owner, host string }

// groupUsage is the usage of a provisioner's hosts as a group of reservations changes it.
type groupUsage struct {
	used  map[string]int    // host -> slots reserved
	owned map[ownerHost]int // how many of an owner's resources each host holds
}

// view is the usage a pick for owner's resource with reservation current (nil: none) is
// shown: every host that holds a reservation, by host, with the owner's other resources.
func (u groupUsage) view(owner string, current *domain.Reservation) []domain.HostUsage {
	hosts := make([]string, 0, len(u.used))
	for host := range u.used {
		hosts = append(hosts, host)
	}
	slices.Sort(hosts)
	out := make([]domain.HostUsage, len(hosts))
	for i, host := range hosts {
		out[i] = domain.HostUsage{Host: host, UsedSlots: u.used[host], OwnerResources: u.owned[ownerHost{owner, host}]}
	}
	if current != nil {
		discountOwn(out, *current, owner)
	}
	return out
}

// move records req's reservation moving from current (nil: none) to host.
func (u groupUsage) move(req domain.SlotRequest, current *domain.Reservation, host string) {
	if current != nil {
		u.used[current.Host] -= current.Slots
		u.owned[ownerHost{current.Owner, current.Host}]--
	}
	u.used[host] += req.Slots
	u.owned[ownerHost{req.Owner, host}]++
}
