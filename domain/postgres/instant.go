package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// instantFenceSQL locks row $1 for update and says whether it is untouched as the caller
// read it (see domain.InstantProvision): pending since created, at generation $4 and of
// owner $5, of the types $3, with the provisioner $2 or none, no live lease, no retry due,
// neither paused nor to be hibernated, an owner without a quota, and a schema no newer than
// version $6. A lease whose holder is a dead agent is left to the claim, which reports the
// takeover.
const instantFenceSQL = `
	SELECT status = 'pending' AND reason = 'Created' AND next_attempt_at IS NULL
	       AND NOT paused AND NOT hibernate
	       AND provisioner IN ('', $2) AND type = ANY ($3::text[])
	       AND generation = $4 AND owner = $5
	       AND (lease_holder IS NULL OR lease_expires_at < now())
	       AND NOT EXISTS (SELECT 1 FROM owner_quotas q WHERE q.owner = resources.owner)
	       AND NOT EXISTS (` + backend.SchemaNewerSQL + `$6)
	  FROM resources WHERE id = $1
	   FOR UPDATE`

// queueInstantFence queues instantFenceSQL for c, whose request has Instant, and sets
// c.instant to its answer (false when the row is gone).
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
// earlier lease is refused. The steps passed on the way ($7 statuses, $8 messages, in order)
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
	       ready_at = coalesce(ready_at, now()),
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
