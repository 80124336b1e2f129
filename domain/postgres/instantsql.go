package postgres

// The statements of a group of one-transaction provisions (instant.go), and how each
// queues its arguments and hands the rows it returns back to the group's calls.

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// untouchedLockSQL is a select that locks for update, one by one in the order of the array
// ids (the caller's: id order), those of its rows that are untouched as the caller read them,
// and returns their ids and the locked versions' ctids (l.id, l.row_ctid). Untouched:
// pending since created, row ids[i] at generation gens[i] and of owner owners[i], of the
// types types, with the provisioner provisioner or none, no live lease, no retry due,
// neither paused nor to be hibernated, an owner without a quota, no reservation of
// provisioner yet, and a schema no newer than version schema. A
// lease whose holder is a dead agent is left to the claim, which reports the takeover. The
// conditions are the lookup's WHERE, so that a row another agent holds is not locked: its
// holder's reservation waits for none of these. Each row is
// looked up on its own (LATERAL), by primary key, in the order given: joined with the
// array, a plan may read every pending row through the index of rows needing attention, and
// lock in its own order. The owner is compared with IS NOT DISTINCT FROM (the column is
// never NULL), which no index serves: compared with =, a plan made on a few rows looked each
// row up through an index on the owner and filtered the rest of a burst of that owner. The
// arguments are the statement's placeholders.
func untouchedLockSQL(ids, gens, owners, provisioner, types, schema string) string {
	return `
	SELECT l.id, l.row_ctid
	  FROM unnest(` + ids + `::uuid[], ` + gens + `::bigint[], ` + owners + `::text[]) AS f(fence_id, fence_generation, fence_owner),
	       LATERAL (SELECT r.id, r.ctid AS row_ctid FROM resources r
	                 WHERE r.id = f.fence_id
	                   AND r.status = 'pending' AND r.reason = 'Created' AND r.next_attempt_at IS NULL
	                   AND NOT r.paused AND NOT r.hibernate
	                   AND r.provisioner IN ('', ` + provisioner + `) AND r.type = ANY (` + types + `::text[])
	                   AND r.generation = f.fence_generation AND r.owner IS NOT DISTINCT FROM f.fence_owner
	                   AND (r.lease_holder IS NULL OR r.lease_expires_at < now())
	                   AND NOT EXISTS (SELECT 1 FROM owner_quotas q WHERE q.owner = r.owner)
	                   AND NOT EXISTS (SELECT 1 FROM slot_reservations s WHERE s.provisioner = ` + provisioner + ` AND s.resource_id = r.id)
	                   AND NOT EXISTS (` + backend.SchemaNewerSQL + schema + `)
	                   FOR UPDATE) AS l`
}

// instantLockSQL locks those of the rows $1 (at generations $2, of owners $3) that are
// untouched for provisioner $4, of the types $5, under schema version $6 (untouchedLockSQL),
// and returns their ids.
var instantLockSQL = `SELECT id::text FROM (` + untouchedLockSQL("$1", "$2", "$3", "$4", "$5", "$6") + `) AS locked`

// queueInstantLock queues instantLockSQL for the calls of group, one provisioner's in id
// order, and sets instant on each call whose row it locked: one statement for the group,
// where one per row cost each row a statement's round of the server's work.
func queueInstantLock(b *pgx.Batch, group []*reserveCall, schema int) {
	n := len(group)
	ids, gens, owners := make([]pgtype.UUID, n), make([]int64, n), make([]string, n)
	byID := make(map[[16]byte]*reserveCall, n)
	for i, c := range group {
		c.instant = false
		ids[i], gens[i], owners[i] = c.uid, c.req.Instant.Generation, c.req.Owner
		byID[c.uid.Bytes] = c
	}
	in := group[0].req.Instant
	b.Queue(instantLockSQL, ids, gens, owners, group[0].req.Provisioner, backend.InstantTypes(in), schema).Query(func(rows pgx.Rows) error {
		_, err := eachReturned(rows, byID, "lock the resources", func(row pgx.Row) (string, func(*reserveCall), error) {
			var id string
			err := row.Scan(&id)
			return id, func(c *reserveCall) { c.instant = true }, err
		})
		return err
	})
}

// instantReadySQL records a group's rows, locked by instantLockSQL in the same transaction,
// ready, in one statement: each as the claim that starts provisioning and the ready record
// that releases its lease would together, in one update of the row. Row $1[i] gets the
// message $2[i], state $4[i], config $5[i] and is admitted at $6[i] units on provisioner $3.
// The lease token moves on, so that a write under any earlier lease is refused. ready_at is
// the update's own time, not the transaction's start: the transaction began before the rows
// were locked and their hosts picked. The statement writes the rows' history itself: each
// row's steps passed on the way and then its ready event ($8[j] statuses and $9[j] messages
// of row $7[j], in order), the events the history trigger would have written after the
// steps; the trigger skips this write, the only one that moves lease_token on without taking
// a lease (migration 0022), because a trigger call per row was a quarter of the statement's
// time. One statement for the group, not one per row, because each statement's own cost
// (executing it, its CTEs and RETURNING) was most of a row's. It returns the columns
// returning of each row recorded.
func instantReadySQL(returning string) string {
	return `
	WITH updated AS (
	UPDATE resources
	   SET ` + instantReadySet + `
	  FROM unnest($1::uuid[], $2::text[], $4::text[], $5::text[], $6::bigint[]) AS ready(ready_id, ready_message, ready_state, ready_config, ready_units)
	 WHERE id = ready.ready_id
	RETURNING ` + returning + `
	), history AS (
	INSERT INTO resource_events (resource_id, kind, status, message)
	SELECT step.resource_id, 'status', step.status, step.message
	  FROM unnest($7::uuid[], $8::text[], $9::text[]) WITH ORDINALITY AS step(resource_id, status, message, n)
	 ORDER BY step.n
	)
	SELECT * FROM updated`
}

// instantReadySet is the ready record of instantReadySQL and instantWarmReadySQL.
const instantReadySet = `status = 'ready',
	       status_message = ready.ready_message,
	       reason = 'Available',
	       waiting_since = NULL,
	       last_attempt_at = now(),
	       provisioner = $3,
	       state = ready.ready_state::jsonb,
	       config = ready.ready_config::jsonb,
	       observed_generation = generation,
	       attempts = 0,
	       next_attempt_at = NULL,
	       last_error = '',
	       ready_at = coalesce(ready_at, clock_timestamp()),
	       lease_holder = NULL,
	       lease_expires_at = NULL,
	       lease_token = lease_token + 1,
	       admitted_provisioner = $3,
	       admitted_units = ready.ready_units`

// instantWarmReadySQL is instantReadySQL for rows not locked yet: it first locks those of
// the rows $1 that are untouched as the caller read them (untouchedLockSQL: row $1[i] at
// generation $10[i] and of owner $11[i], of the types $12, for provisioner $3, under a
// schema no newer than version $13), and records only those ready, with their history. A
// row that is not is neither locked nor written, and returns no row. The update finds the
// locked rows by their ctids (a TID scan), so that no plan reads the table.
func instantWarmReadySQL(returning string) string {
	return `
	WITH fenced AS (` + untouchedLockSQL("$1", "$10", "$11", "$3", "$12", "$13") + `
	), updated AS (
	UPDATE resources
	   SET ` + instantReadySet + `
	  FROM unnest($1::uuid[], $2::text[], $4::text[], $5::text[], $6::bigint[]) AS ready(ready_id, ready_message, ready_state, ready_config, ready_units)
	 WHERE ctid = ANY (ARRAY(SELECT row_ctid FROM fenced)) AND id = ready.ready_id
	RETURNING ` + returning + `
	), history AS (
	INSERT INTO resource_events (resource_id, kind, status, message)
	SELECT step.resource_id, 'status', step.status, step.message
	  FROM unnest($7::uuid[], $8::text[], $9::text[]) WITH ORDINALITY AS step(resource_id, status, message, n)
	 WHERE step.resource_id IN (SELECT id FROM fenced)
	 ORDER BY step.n
	)
	SELECT * FROM updated`
}

// The ready statements return each row whole (readyRowsColumns) when a call of the group
// asks for its row (domain.InstantProvision.Recorded), and its id and ready_at otherwise
// (readyTimeColumns): the agent asks for no more, and reading back and decoding the whole
// rows (their JSON columns) was an eighth of its CPU time under a burst.
const (
	readyRowsColumns = resourceColumns
	readyTimeColumns = `id::text, ready_at`
)

var (
	instantReadyRowsSQL      = instantReadySQL(readyRowsColumns)
	instantReadyTimesSQL     = instantReadySQL(readyTimeColumns)
	instantWarmReadyRowsSQL  = instantWarmReadySQL(readyRowsColumns)
	instantWarmReadyTimesSQL = instantWarmReadySQL(readyTimeColumns)
)

// instantReady is one row's part of instantReadySQL.
type instantReady struct {
	message, state, config string
	units                  int64
	statuses, messages     []string // the steps passed on the way, in order
}

// newInstantReady returns the ready record rec of a resource provisioned by in.
func newInstantReady(in *domain.InstantProvision, rec domain.ReadyRecord) (instantReady, error) {
	if rec.State == nil || rec.Config == nil {
		return instantReady{}, fmt.Errorf("the broker reported no state or no config for the resource ready")
	}
	state, err := json.Marshal(rec.State)
	if err != nil {
		return instantReady{}, fmt.Errorf("encode the resource's state: %w", err)
	}
	config, err := json.Marshal(rec.Config)
	if err != nil {
		return instantReady{}, fmt.Errorf("encode the resource's config: %w", err)
	}
	statuses, messages := backend.InstantSteps(in)
	return instantReady{
		message: domain.ReadyMessage(in.Generation, rec.Notice), state: string(state), config: string(config),
		units: in.Units, statuses: statuses, messages: messages,
	}, nil
}

// queueInstantReady queues instantReadySQL for the picked calls, and sets each call's
// Recorded and ReadyAt to its row as recorded. A picked row the statement did not update
// fails the batch, and so the group's transaction.
func queueInstantReady(b *pgx.Batch, picked []*reserveCall) {
	args, byID := instantReadyArgs(picked)
	query, scan := instantReadyTimesSQL, scanReadyTime
	if wantsRows(picked) {
		query, scan = instantReadyRowsSQL, scanReadyRow
	}
	b.Queue(query, args...).Query(func(rows pgx.Rows) error {
		return eachPicked(rows, byID, "record the resources ready", scan)
	})
}

// queueInstantWarmReady queues instantWarmReadySQL for the picked calls, and sets instant,
// Recorded and ReadyAt on each call whose row it recorded ready.
func queueInstantWarmReady(b *pgx.Batch, picked []*reserveCall, schema int) {
	args, byID := instantReadyArgs(picked)
	gens, owners := make([]int64, len(picked)), make([]string, len(picked))
	for i, c := range picked {
		c.instant = false
		gens[i], owners[i] = c.req.Instant.Generation, c.req.Owner
	}
	args = append(args, gens, owners, backend.InstantTypes(picked[0].req.Instant), schema)
	query, scan := instantWarmReadyTimesSQL, scanReadyTime
	if wantsRows(picked) {
		query, scan = instantWarmReadyRowsSQL, scanReadyRow
	}
	b.Queue(query, args...).Query(func(rows pgx.Rows) error {
		_, err := eachReturned(rows, byID, "record the resources ready", func(row pgx.Row) (string, func(*reserveCall), error) {
			id, set, err := scan(row)
			return id, func(c *reserveCall) {
				c.instant = true
				set(c)
			}, err
		})
		return err
	})
}

// wantsRows reports whether a call of picked asks for its row as recorded ready.
func wantsRows(picked []*reserveCall) bool {
	return slices.ContainsFunc(picked, func(c *reserveCall) bool { return c.req.Instant.Recorded != nil })
}

// scanReadyRow reads a row of a ready statement returning readyRowsColumns, and sets
// Recorded and ReadyAt, each when asked for.
func scanReadyRow(row pgx.Row) (string, func(*reserveCall), error) {
	r, err := scanResource(row)
	return r.ID, func(c *reserveCall) {
		if c.req.Instant.Recorded != nil {
			*c.req.Instant.Recorded = r
		}
		if c.req.Instant.ReadyAt != nil && r.ReadyAt != nil {
			*c.req.Instant.ReadyAt = *r.ReadyAt
		}
	}, err
}

// scanReadyTime reads a row of a ready statement returning readyTimeColumns, and sets
// ReadyAt when asked for.
func scanReadyTime(row pgx.Row) (string, func(*reserveCall), error) {
	var id string
	var readyAt time.Time
	err := row.Scan(&id, &readyAt)
	return id, func(c *reserveCall) {
		if c.req.Instant.ReadyAt != nil {
			*c.req.Instant.ReadyAt = readyAt
		}
	}, err
}

// instantReadyArgs returns instantReadySQL's arguments for the picked calls ($1 to $9),
// and the calls by resource id.
func instantReadyArgs(picked []*reserveCall) ([]any, map[[16]byte]*reserveCall) {
	n := len(picked)
	ids, units := make([]pgtype.UUID, n), make([]int64, n)
	msgs, states, configs := make([]string, n), make([]string, n), make([]string, n)
	var (
		stepIDs                    []pgtype.UUID
		stepStatuses, stepMessages []string
	)
	byID := make(map[[16]byte]*reserveCall, n)
	for i, c := range picked {
		ids[i], msgs[i], states[i], configs[i], units[i] = c.uid, c.ready.message, c.ready.state, c.ready.config, c.ready.units
		for j := range c.ready.statuses {
			stepIDs = append(stepIDs, c.uid)
			stepStatuses = append(stepStatuses, c.ready.statuses[j])
			stepMessages = append(stepMessages, c.ready.messages[j])
		}
		stepIDs = append(stepIDs, c.uid)
		stepStatuses = append(stepStatuses, string(domain.StatusReady))
		stepMessages = append(stepMessages, c.ready.message)
		byID[c.uid.Bytes] = c
	}
	return []any{ids, msgs, picked[0].req.Provisioner, states, configs, units, stepIDs, stepStatuses, stepMessages}, byID
}

// eachPicked hands each row of rows, a group statement's RETURNING, to the call it is of
// (byID), as scan reads it: its resource id, and what to set on the call. A row of no call,
// or a call with no row, fails the statement's batch, and so the group's transaction. what
// says what the statement does, for its errors.
func eachPicked(rows pgx.Rows, byID map[[16]byte]*reserveCall, what string, scan func(pgx.Row) (string, func(*reserveCall), error)) error {
	seen, err := eachReturned(rows, byID, what, scan)
	if err == nil && seen != len(byID) {
		err = fmt.Errorf("%s: %d of %d rows written", what, seen, len(byID))
	}
	return err
}

// eachReturned is eachPicked for a statement that may leave calls without a row: it returns
// how many rows it handed out.
func eachReturned(rows pgx.Rows, byID map[[16]byte]*reserveCall, what string, scan func(pgx.Row) (string, func(*reserveCall), error)) (int, error) {
	seen := 0
	for rows.Next() {
		id, set, err := scan(rows)
		if err != nil {
			return seen, fmt.Errorf("%s: %w", what, describeDBError(err))
		}
		uid, err := parseID(id)
		if err != nil {
			return seen, err
		}
		c, ok := byID[uid.Bytes]
		if !ok {
			return seen, fmt.Errorf("%s: resource %s was not asked for", what, id)
		}
		set(c)
		seen++
	}
	if err := rows.Err(); err != nil {
		return seen, fmt.Errorf("%s: %w", what, describeDBError(err))
	}
	return seen, nil
}

// instantReservationsSQL writes the reservations of a group's resources ($2[i] of owner
// $3[i] on host $4[i], $5[i] slots) on provisioner $1 in one statement. Its trigger adds
// them to the hosts' usage rows in host order (0023), so that two groups that share hosts
// lock their rows in the same order.
const instantReservationsSQL = `
	INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
	SELECT $1, r.resource_id, r.owner, r.host, r.slots
	  FROM unnest($2::uuid[], $3::text[], $4::text[], $5::int[]) AS r(resource_id, owner, host, slots)
	ON CONFLICT (provisioner, resource_id) DO UPDATE
	   SET owner = EXCLUDED.owner, host = EXCLUDED.host, slots = EXCLUDED.slots, updated_at = now()
	RETURNING provisioner, resource_id::text, owner, host, slots`

// queueInstantReservations queues instantReservationsSQL for the picked calls, and sets each
// call's reservation to the one written, then the check of their hosts' room (hostRoomSQL).
func queueInstantReservations(b *pgx.Batch, provisioner string, picked []*reserveCall) {
	ids, owners, hosts, slots := make([]pgtype.UUID, len(picked)), make([]string, len(picked)), make([]string, len(picked)), make([]int64, len(picked))
	byID := make(map[[16]byte]*reserveCall, len(picked))
	added := newHostsAdded()
	for i, c := range picked {
		ids[i], owners[i], hosts[i], slots[i] = c.uid, c.req.Owner, c.out.Host, int64(c.req.Slots)
		byID[c.uid.Bytes] = c
		added.write(c.req, nil, c.out.Host)
	}
	b.Queue(instantReservationsSQL, provisioner, ids, owners, hosts, slots).Query(func(rows pgx.Rows) error {
		return eachPicked(rows, byID, "record the reservations", func(row pgx.Row) (string, func(*reserveCall), error) {
			res, err := scanReservation(row)
			return res.ResourceID, func(c *reserveCall) { c.out = res }, err
		})
	})
	added.queueCheck(b, provisioner)
}
