package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// instantLanes is how many groups of one provisioner's one-transaction provisions may be in
// flight at once. Groups in flight together update their rows in parallel, and queue only
// for the usage rows of the hosts they share, from their reservations' write to their commit.
const instantLanes = 4

// instants returns the group a one-transaction provision of provisioner's joins: the first
// lane whose next group is not full yet. Under light load every call takes the first lane,
// so that groups stay large and the hosts' usage rows are written once per group; a lane
// spills into the next only once it has a full group waiting.
func (s *State) instants(provisioner string) *backend.Group[*reserveCall] {
	lanes := s.instantLanes(provisioner)
	for _, g := range lanes.groups[:instantLanes-1] {
		if g.Queued() < maxGroup {
			return g
		}
	}
	return lanes.groups[instantLanes-1]
}

// instantLanes returns provisioner's lanes of one-transaction provisions.
func (s *State) instantLanes(provisioner string) *instantGroups {
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	lanes, ok := s.instant[provisioner]
	if !ok {
		lanes = &instantGroups{}
		for i := range lanes.groups {
			lanes.groups[i] = backend.NewGroup(maxGroup, s.runInstants)
		}
		s.instant[provisioner] = lanes
	}
	return lanes
}

// forgetUsage makes provisioner's next one-transaction group read its hosts' usage before
// it picks: this agent changed the usage outside such a group.
func (s *State) forgetUsage(provisioner string) {
	s.reserveMu.Lock()
	lanes, ok := s.instant[provisioner]
	s.reserveMu.Unlock()
	if ok {
		lanes.usage.forget()
	}
}

// instantGroups are the lanes of one provisioner's one-transaction provisions, and the
// usage of its hosts as their last group committed it.
type instantGroups struct {
	groups [instantLanes]*backend.Group[*reserveCall]
	usage  usageCache
	// running counts the groups of the lanes in flight: a group guesses its hosts only
	// when it runs alone, since the usage another group is committing meanwhile would
	// make its guess stale.
	running atomic.Int32
}

// runInstants provisions a group of one provisioner's resources whole in one transaction:
// guessing their hosts on the usage the group before it left when it runs alone and the
// cache has the usage (instantWarmOn), else reading the usage first (instantGroupOn). A
// group whose guess was stale is run again reading the usage first; when the transaction
// fails otherwise, each call runs alone.
func (s *State) runInstants(ctx context.Context, calls []*reserveCall) {
	slices.SortStableFunc(calls, func(a, b *reserveCall) int { return bytes.Compare(a.uid.Bytes[:], b.uid.Bytes[:]) })
	conn, err := s.pool.Acquire(withoutIdlePing(ctx))
	if err != nil {
		return
	}
	defer conn.Release()
	lanes := s.instantLanes(calls[0].req.Provisioner)
	cache := &lanes.usage
	alone := lanes.running.Add(1) == 1
	defer lanes.running.Add(-1)
	_, _, owners := distinct(calls)
	if usage, ok := cache.take(owners, alone); ok {
		err := instantWarmOn(ctx, conn.Conn(), calls, s.schema, usage, cache)
		if err == nil {
			return
		}
		rollback(conn.Conn())
		unrun(calls)
		if !errors.Is(err, errStaleGuess) {
			cache.forget()
			return
		}
		cache.missed()
	}
	if err := instantGroupOn(ctx, conn.Conn(), calls, s.schema, cache); err != nil {
		rollback(conn.Conn())
		unrun(calls)
	}
}

// unrun clears what a group's failed transaction set on its calls, the rows it recorded
// included, so that each runs again.
func unrun(calls []*reserveCall) {
	for _, c := range calls {
		c.ran, c.out, c.err, c.instant, c.ready = false, domain.Reservation{}, nil, false, instantReady{}
		if c.req.Instant.Recorded != nil {
			*c.req.Instant.Recorded = domain.Resource{}
		}
		if c.req.Instant.ReadyAt != nil {
			*c.req.Instant.ReadyAt = time.Time{}
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
	err = instantGroupOn(ctx, conn.Conn(), []*reserveCall{call}, s.schema, &s.instantLanes(call.req.Provisioner).usage)
	if err != nil {
		rollback(conn.Conn())
		if errors.Is(err, errHostFilled) {
			err = fmt.Errorf("%w: %w", err, domain.ErrNotInstant)
		}
		return domain.Reservation{}, err
	}
	return call.out, call.err
}

// instantGroupOn provisions the calls' resources whole in one transaction on conn, in two
// round trips: the first locks every row that is untouched as read (instantLockSQL: one
// statement, FOR UPDATE in id order; a row that is not, one with a reservation of the
// provisioner included, is neither locked nor written) and reads the usage of the hosts;
// each call is then picked a host in turn on the usage the picks before it left; the second
// records the rows ready, writes the reservations, checks that each host they add slots to
// has room for them against every committed reservation (hostRoomSQL), reads the usage so
// committed and commits. A host without room fails the statement, and so the transaction
// whole (errHostFilled): the caller rolls it back. A call whose row is not untouched, or
// that finds no room, writes nothing and gets its error. cache learns the usage the group
// committed.
func instantGroupOn(ctx context.Context, conn *pgx.Conn, calls []*reserveCall, schema int, cache *usageCache) error {
	provisioner := calls[0].req.Provisioner
	group, _, owners := distinct(calls)
	usage := groupUsage{used: make(map[string]int), owned: make(map[ownerHost]int)}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(genericPlansSQL)
	queueInstantLock(b, group, schema)
	queueUsage(b, provisioner, owners, usage)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}

	var picked []*reserveCall
	for _, c := range group {
		if !c.instant {
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
		if err := c.placeOn(host); err != nil {
			c.err = err
			continue
		}
		usage.move(c.req, nil, host)
		picked = append(picked, c)
	}
	if len(picked) == 0 {
		_, err := conn.Exec(ctx, `ROLLBACK`)
		markRan(group)
		return err
	}
	b = &pgx.Batch{}
	queueInstantReady(b, picked)
	queueInstantReservations(b, provisioner, picked)
	committed := make(map[string]int)
	queueHostUsage(b, provisioner, committed)
	b.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return roomRefusal(err)
	}
	markRan(group)
	cache.learn(committed, owners, usage.owned, false)
	return nil
}

// errStaleGuess is why a group that picked its hosts on the cached usage is run again
// reading it first: a pick on the cache found no host, the usage as committed gives another
// host than the cache did, or a host guessed filled before the group could write there.
var errStaleGuess = errors.New("the hosts picked on the cached usage are not those the committed usage gives")

// instantWarmOn provisions the calls' resources whole in one transaction on conn, as
// instantGroupOn does, but guesses their hosts before it begins, picking them on usage, the
// usage the provisioner's last group left (usageCache), and so takes two round trips. The
// first locks every row that is still untouched as read (in id order, with no reservation
// of the provisioner) and records it ready on its guessed host in one statement
// (instantWarmReadySQL), then reads the usage as committed. Each recorded call is picked a
// host again on that usage, in turn, as instantGroupOn would pick it had it read that usage;
// if every pick is the guess, the second round trip writes the reservations, checks the
// room of their hosts as instantGroupOn does, and commits. Otherwise nothing is written
// (errStaleGuess: the caller rolls the transaction back and runs the group again reading
// the usage first), and so a guess never places a resource elsewhere than the committed
// usage gives, and never on a host without room. A call whose row is not untouched writes
// nothing and gets domain.ErrNotInstant. cache learns the usage the group committed.
func instantWarmOn(ctx context.Context, conn *pgx.Conn, calls []*reserveCall, schema int, usage groupUsage, cache *usageCache) error {
	provisioner := calls[0].req.Provisioner
	group, _, owners := distinct(calls)
	var guessed []*reserveCall
	for _, c := range group {
		host, err := c.pick(c.req, nil, usage.view(c.req.Owner, nil))
		if err != nil || host == "" {
			return errStaleGuess
		}
		if err := c.placeOn(host); err != nil {
			c.err = err
			continue
		}
		usage.move(c.req, nil, host)
		guessed = append(guessed, c)
	}
	if len(guessed) == 0 {
		markRan(group)
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(genericPlansSQL)
	queueInstantWarmReady(b, guessed, schema)
	committed := groupUsage{used: make(map[string]int), owned: make(map[ownerHost]int)}
	queueUsage(b, provisioner, owners, committed)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	var recorded []*reserveCall
	for _, c := range guessed {
		if !c.instant {
			c.err = domain.ErrNotInstant
			continue
		}
		host, err := c.pick(c.req, nil, committed.view(c.req.Owner, nil))
		if err != nil || host != c.out.Host {
			return errStaleGuess
		}
		committed.move(c.req, nil, host)
		recorded = append(recorded, c)
	}
	if len(recorded) == 0 {
		_, err := conn.Exec(ctx, `ROLLBACK`)
		markRan(group)
		return err
	}
	b = &pgx.Batch{}
	queueInstantReservations(b, provisioner, recorded)
	b.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if err := roomRefusal(err); errors.Is(err, errHostFilled) {
			return fmt.Errorf("%w: %w", errStaleGuess, err)
		}
		return err
	}
	markRan(group)
	cache.learn(committed.used, owners, committed.owned, true)
	return nil
}

// placeOn makes host the call's pick: its reservation, and its row's ready record there.
func (c *reserveCall) placeOn(host string) error {
	in := c.req.Instant
	c.out = domain.Reservation{Provisioner: c.req.Provisioner, ResourceID: c.req.ResourceID, Owner: c.req.Owner, Host: host, Slots: c.req.Slots}
	rec, err := in.Ready(c.out)
	if err == nil {
		c.ready, err = newInstantReady(in, rec)
	}
	return err
}

// genericPlansSQL has a group run its statements on the plans the server caches for them.
// Left to choose, the server plans a group's statements afresh at every run, because their
// arrays' sizes make the cached plans look dearer: the ready record half a millisecond a
// group, as long as the statement's whole run for a group of one, and the lock of a group
// that reads the usage first 0.25 ms (a fifth of its server time per runtime, three agents
// sharing a pool taking that path nearly always). Their cached plans read by key whatever
// the tables held when they were made (TestInstantWarmReadyRecordLocksByKey,
// TestInstantLockLocksByKeyInTheOrderGiven, TestInstantReadyRecordUpdatesByKeyWithAGenericPlan,
// TestReservationLookupsReadByKeyWithAPlanMadeOnEmptyTables). The plans are made without
// sequential scans: a plan cached on the few rows an idle agent had seen chose a scan of
// resources for the ready record's update, which then read the whole of a later burst for
// every group (TestInstantReadyRecordsReadByKeyAfterABurstOnAPlanMadeOnFewRows); every
// statement of a group reads by key.
const genericPlansSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)`

// markRan marks the calls of group as run in it.
func markRan(group []*reserveCall) {
	for _, c := range group {
		c.ran = true
	}
}
