package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// reserveInstant is ReserveSlots for a request with Instant (see domain.InstantProvision),
// inside tx, which holds the database's write lock from its start: the row is checked
// untouched as read, the reservation made and the row recorded ready, or nothing is written
// and the error wraps domain.ErrNotInstant. It returns the reservation and the row as
// recorded.
func (s *State) reserveInstant(ctx context.Context, tx *sql.Tx, req domain.SlotRequest, uid string, pick domain.PickHost) (domain.Reservation, rawResource, error) {
	in := req.Instant
	types, err := json.Marshal(backend.InstantTypes(in))
	if err != nil {
		return domain.Reservation{}, rawResource{}, err
	}
	var untouched bool
	err = tx.QueryRowContext(ctx, `
		SELECT r.status = 'pending' AND r.reason = 'Created' AND r.next_attempt_at IS NULL
		       AND NOT r.paused AND NOT r.hibernate
		       AND r.provisioner IN ('', $2) AND r.generation = $3 AND r.owner = $4
		       AND (r.lease_holder IS NULL OR r.lease_expires_at < `+nowSQL+`)
		       AND NOT EXISTS (SELECT 1 FROM owner_quotas q WHERE q.owner = r.owner)
		       AND NOT EXISTS (SELECT 1 FROM slot_reservations s WHERE s.provisioner = $2 AND s.resource_id = r.id)
		       AND NOT EXISTS (`+backend.SchemaNewerSQL+`$5)
		       AND r.type IN (SELECT value FROM json_each($6))
		  FROM resources r WHERE r.id = $1`,
		uid, in.Provisioner, in.Generation, req.Owner, s.schema, string(types)).Scan(&untouched)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return domain.Reservation{}, rawResource{}, fmt.Errorf("read resource %s: %w", req.ResourceID, err)
	}
	if !untouched {
		return domain.Reservation{}, rawResource{}, domain.ErrNotInstant
	}
	usage, err := hostUsage(ctx, tx, req)
	if err != nil {
		return domain.Reservation{}, rawResource{}, fmt.Errorf("read host usage: %w", err)
	}
	host, err := pick(req, nil, usage)
	if err != nil {
		return domain.Reservation{}, rawResource{}, err
	}
	if host == "" {
		return domain.Reservation{}, rawResource{}, fmt.Errorf("the host picker chose no host")
	}
	res := domain.Reservation{Provisioner: req.Provisioner, ResourceID: uid, Owner: req.Owner, Host: host, Slots: req.Slots}
	rec, err := in.Ready(res)
	if err != nil {
		return domain.Reservation{}, rawResource{}, err
	}
	if rec.State == nil || rec.Config == nil {
		return domain.Reservation{}, rawResource{}, fmt.Errorf("the broker reported no state or no config for the resource ready")
	}
	state, err := encodeJSON("state", rec.State)
	if err != nil {
		return domain.Reservation{}, rawResource{}, err
	}
	config, err := encodeJSON("config", rec.Config)
	if err != nil {
		return domain.Reservation{}, rawResource{}, err
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots) VALUES ($1, $2, $3, $4, $5)`,
		req.Provisioner, uid, req.Owner, host, req.Slots); err != nil {
		return domain.Reservation{}, rawResource{}, fmt.Errorf("record the reservation on %s: %w", host, describeDBError(err))
	}
	// The steps passed on the way go before the update, whose trigger writes the ready
	// event: one statement, its rows in order.
	statuses, messages := backend.InstantSteps(in)
	if len(statuses) > 0 {
		steps, err := json.Marshal(map[string][]string{"statuses": statuses, "messages": messages})
		if err != nil {
			return domain.Reservation{}, rawResource{}, err
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO resource_events (resource_id, kind, status, message)
			SELECT $1, 'status', s.value, m.value
			  FROM json_each($2, '$.statuses') AS s JOIN json_each($2, '$.messages') AS m ON m.key = s.key
			 ORDER BY s.key`, uid, string(steps)); err != nil {
			return domain.Reservation{}, rawResource{}, describeDBError(err)
		}
	}
	// As the claim that starts provisioning and the ready record that releases its lease
	// would together, in one update of the row; the lease token moves on, so that a write
	// under any earlier lease is refused.
	raw, err := scanRawResource(tx.QueryRowContext(ctx, `
		UPDATE resources
		   SET status = 'ready',
		       `+statusChangedSQL("'ready'")+`,
		       status_message = $2,
		       reason = 'Available',
		       waiting_since = NULL,
		       last_attempt_at = `+nowSQL+`,
		       provisioner = $3,
		       state = $4,
		       config = $5,
		       observed_generation = generation,
		       attempts = 0,
		       next_attempt_at = NULL,
		       last_error = '',
		       ready_at = coalesce(ready_at, `+nowSQL+`),
		       lease_holder = NULL,
		       lease_expires_at = NULL,
		       lease_token = lease_token + 1,
		       admitted_provisioner = $3,
		       admitted_units = $6,
		       `+touchSQL+`
		 WHERE id = $1
		RETURNING `+resourceColumns,
		uid, domain.ReadyMessage(in.Generation, rec.Notice), in.Provisioner, state, config, in.Units))
	if err != nil {
		return domain.Reservation{}, rawResource{}, fmt.Errorf("record resource %s ready: %w", req.ResourceID, describeDBError(err))
	}
	return res, raw, nil
}
