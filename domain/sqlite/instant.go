package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// untouchedSQL is true for the row r when domain.InstantProvision may provision it, but for
// its reservation (none on $2 may exist yet): pending since created, at generation $3 of
// owner $4, on no provisioner or provisioner $2, neither paused nor to be hibernated, with no
// retry due, no live lease and no quota for its owner, of a schema no newer than $5 and of a
// type of the JSON array $6.
const untouchedSQL = `r.status = 'pending' AND r.reason = 'Created' AND r.next_attempt_at IS NULL
	       AND NOT r.paused AND NOT r.hibernate
	       AND r.provisioner IN ('', $2) AND r.generation = $3 AND r.owner = $4
	       AND (r.lease_holder IS NULL OR r.lease_expires_at < ` + nowSQL + `)
	       AND NOT EXISTS (SELECT 1 FROM owner_quotas q WHERE q.owner = r.owner)
	       AND NOT EXISTS (` + backend.SchemaNewerSQL + `$5)
	       AND r.type IN (SELECT value FROM json_each($6))`

// reserveInstant is ReserveSlots for a request with Instant (see domain.InstantProvision),
// inside tx, which holds the database's write lock from its start and runs in a savepoint
// that an error rolls back: the host is picked, the reservation and the steps written and the
// row recorded ready by an update that applies only to a row untouched as read, or the error
// wraps domain.ErrNotInstant and nothing stays written. The row's check is the update's own
// condition, not a read of its own before it: a read per runtime was a sixth of the writer's
// time, and a row that is not untouched is rare. It returns the reservation and the row as
// recorded. The host usage comes from usage, the group's memo, and the reservation is added
// to it once the row is recorded ready.
func (s *State) reserveInstant(ctx context.Context, tx *sql.Tx, usageMemo *usageMemo, req domain.SlotRequest, uid string, pick domain.PickHost) (domain.Reservation, rawResource, error) {
	in := req.Instant
	types, err := json.Marshal(backend.InstantTypes(in))
	if err != nil {
		return domain.Reservation{}, rawResource{}, err
	}
	untouchedArgs := []any{uid, in.Provisioner, in.Generation, req.Owner, s.schema, string(types)}
	// A failure to place or describe the resource is the caller's only for a row this path
	// may provision; any other row goes the usual way, as it would have before the pick.
	notInstantOr := func(err error) error {
		var untouched bool
		if rerr := tx.QueryRowContext(ctx, `SELECT `+untouchedSQL+`
			AND NOT EXISTS (SELECT 1 FROM slot_reservations s WHERE s.provisioner = $2 AND s.resource_id = r.id)
			FROM resources r WHERE r.id = $1`, untouchedArgs...).Scan(&untouched); rerr != nil && !errors.Is(rerr, sql.ErrNoRows) {
			return fmt.Errorf("read resource %s: %w", req.ResourceID, rerr)
		}
		if !untouched {
			return domain.ErrNotInstant
		}
		return err
	}
	usage, err := usageMemo.usage(ctx, tx, req)
	if err != nil {
		return domain.Reservation{}, rawResource{}, fmt.Errorf("read host usage: %w", err)
	}
	host, err := pick(req, nil, usage)
	if err == nil && host == "" {
		err = fmt.Errorf("the host picker chose no host")
	}
	if err != nil {
		return domain.Reservation{}, rawResource{}, notInstantOr(err)
	}
	res := domain.Reservation{Provisioner: req.Provisioner, ResourceID: uid, Owner: req.Owner, Host: host, Slots: req.Slots}
	rec, err := in.Ready(res)
	if err == nil && (rec.State == nil || rec.Config == nil) {
		err = fmt.Errorf("the broker reported no state or no config for the resource ready")
	}
	if err != nil {
		return domain.Reservation{}, rawResource{}, notInstantOr(err)
	}
	state, err := encodeJSON("state", rec.State)
	if err != nil {
		return domain.Reservation{}, rawResource{}, err
	}
	config, err := encodeJSON("config", rec.Config)
	if err != nil {
		return domain.Reservation{}, rawResource{}, err
	}
	// A reservation already there means the row is not untouched; the update below checks
	// the rest.
	result, err := tx.ExecContext(ctx, `
		INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (provisioner, resource_id) DO NOTHING`,
		req.Provisioner, uid, req.Owner, host, req.Slots)
	if err != nil {
		return domain.Reservation{}, rawResource{}, fmt.Errorf("record the reservation on %s: %w", host, describeDBError(err))
	}
	if n, err := result.RowsAffected(); err != nil || n == 0 {
		return domain.Reservation{}, rawResource{}, domain.ErrNotInstant
	}
	// The steps passed on the way go before the update, whose trigger writes the ready
	// event: one statement, its rows in order.
	statuses, messages := backend.InstantSteps(in)
	if len(statuses) > 0 {
		values, args := make([]string, len(statuses)), make([]any, 0, 1+2*len(statuses))
		args = append(args, uid)
		for i := range statuses {
			values[i] = fmt.Sprintf("($1, 'status', $%d, $%d)", 2+2*i, 3+2*i)
			args = append(args, statuses[i], messages[i])
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO resource_events (resource_id, kind, status, message) VALUES `+strings.Join(values, ", "), args...); err != nil {
			return domain.Reservation{}, rawResource{}, describeDBError(err)
		}
	}
	// As the claim that starts provisioning and the ready record that releases its lease
	// would together, in one update of the row; the lease token moves on, so that a write
	// under any earlier lease is refused.
	// The row is read back whole only when the caller asks for it (Recorded), its ready_at
	// otherwise.
	returning := `ready_at`
	if in.Recorded != nil {
		returning = resourceColumns
	}
	readyRow := tx.QueryRowContext(ctx, `
		UPDATE resources AS r
		   SET status = 'ready',
		       `+statusChangedSQL("'ready'")+`,
		       status_message = $7,
		       reason = 'Available',
		       waiting_since = NULL,
		       last_attempt_at = `+nowSQL+`,
		       provisioner = $2,
		       state = $8,
		       config = $9,
		       observed_generation = generation,
		       attempts = 0,
		       next_attempt_at = NULL,
		       last_error = '',
		       ready_at = coalesce(ready_at, `+nowSQL+`),
		       lease_holder = NULL,
		       lease_expires_at = NULL,
		       lease_token = lease_token + 1,
		       admitted_provisioner = $2,
		       admitted_units = $10,
		       `+touchSQL+`
		 WHERE r.id = $1 AND `+untouchedSQL+`
		RETURNING `+returning,
		append(untouchedArgs, domain.ReadyMessage(in.Generation, rec.Notice), state, config, in.Units)...)
	var raw rawResource
	if in.Recorded != nil {
		raw, err = scanRawResource(readyRow)
	} else {
		err = readyRow.Scan(&raw.ready)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Reservation{}, rawResource{}, domain.ErrNotInstant
	}
	if err != nil {
		return domain.Reservation{}, rawResource{}, fmt.Errorf("record resource %s ready: %w", req.ResourceID, describeDBError(err))
	}
	usageMemo.reserved(res)
	return res, raw, nil
}
