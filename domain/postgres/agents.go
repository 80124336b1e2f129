package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// RegisterAgent inserts the agent, or starts a new session of a registered id, with the
// schema version this build knows. The session is at least the database clock in
// milliseconds, so it keeps growing across a removal of the row.
func (s *State) RegisterAgent(ctx context.Context, info domain.AgentInfo) (int64, error) {
	if err := backend.CheckAgentInfo(info); err != nil {
		return 0, err
	}
	var session int64
	err := s.pool.QueryRow(ctx, `
		INSERT INTO agents AS a (id, session, started_at, heartbeat_at, version, http_addr, ttl_ms, lease_ttl_ms, schema_version)
		VALUES ($1, (extract(epoch FROM now()) * 1000)::bigint, now(), now(), $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE
		   SET session = greatest(a.session + 1, EXCLUDED.session),
		       started_at = now(), heartbeat_at = now(),
		       version = EXCLUDED.version, http_addr = EXCLUDED.http_addr,
		       ttl_ms = EXCLUDED.ttl_ms, lease_ttl_ms = EXCLUDED.lease_ttl_ms,
		       schema_version = EXCLUDED.schema_version
		RETURNING session`, info.ID, info.Version, info.HTTPAddr,
		backend.AgentTTLMillis(info), info.LeaseTTL.Milliseconds(), s.schema).Scan(&session)
	if err != nil {
		return 0, fmt.Errorf("register agent %s: %w", info.ID, err)
	}
	return session, nil
}

// HeartbeatAgent records a heartbeat while the row has session and renews the id's leases
// in the same transaction.
func (s *State) HeartbeatAgent(ctx context.Context, id string, session int64) error {
	if err := backend.CheckAgentSession(id, session); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var leaseTTLMillis int64
		err := tx.QueryRow(ctx, `
			UPDATE agents SET heartbeat_at = now() WHERE id = $1 AND session = $2
			RETURNING lease_ttl_ms`, id, session).Scan(&leaseTTLMillis)
		if errors.Is(err, pgx.ErrNoRows) {
			return backend.SessionEnded(id, session)
		}
		if err != nil || leaseTTLMillis == 0 {
			return err
		}
		// The rows are locked in id order, as the groups of claims and records lock theirs:
		// locked in the index's order instead, a heartbeat and a group could each hold a row
		// the other waits for, and one of them was aborted as a deadlock.
		_, err = tx.Exec(ctx, heartbeatLeasesSQL, id, leaseTTLMillis)
		return err
	})
	if err != nil {
		return fmt.Errorf("heartbeat of agent %s: %w", id, err)
	}
	return nil
}

// heartbeatLeasesSQL renews the leases of agent $1 by $2 milliseconds.
const heartbeatLeasesSQL = `
	UPDATE resources SET lease_expires_at = now() + $2 * interval '1 millisecond'
	 WHERE id IN (SELECT id FROM resources WHERE lease_holder = $1 ORDER BY id FOR UPDATE)
	   AND lease_holder = $1`

// ResignAgent removes the row of session and clears the id's leases in one transaction.
func (s *State) ResignAgent(ctx context.Context, id string, session int64) error {
	if err := backend.CheckAgentSession(id, session); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, backend.DeleteAgentSQL, id, session)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return backend.SessionEnded(id, session)
		}
		// Each cleared lease is logged as a change, so the other agents' watchers take the
		// resource over at once rather than when something else changes it. The rows are
		// locked in id order, as by the heartbeat.
		tag, err = tx.Exec(ctx, `
			WITH cleared AS (
				UPDATE resources SET lease_holder = NULL, lease_expires_at = NULL
				 WHERE id IN (SELECT id FROM resources WHERE lease_holder = $1 ORDER BY id FOR UPDATE)
				   AND lease_holder = $1
				RETURNING id, owner
			)
			INSERT INTO change_log (resource_id, owner) SELECT id, owner FROM cleared`, id)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify('berth_resource_changes', '')`)
		return err
	})
	if err != nil {
		return fmt.Errorf("resign agent %s: %w", id, err)
	}
	return nil
}

// ListAgents returns every agent by id (in byte order, as SQLite sorts), with its liveness,
// heartbeat age and live leases on the database clock (an agent not live by its own ttl
// holds none: they are void), and the schema version its build knows beside the
// database's.
func (s *State) ListAgents(ctx context.Context, ttl time.Duration) ([]domain.Agent, error) {
	if err := backend.CheckAgentAge("ttl", ttl); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT a.id, a.session, a.version, a.http_addr, a.started_at, a.heartbeat_at,
		       a.heartbeat_at > now() - $1 * interval '1 microsecond',
		       greatest((extract(epoch FROM now() - a.heartbeat_at) * 1000000)::bigint, 0),
		       coalesce(l.leases, 0), `+leaderSQL+`,
		       a.schema_version, (`+backend.SchemaVersionSQL+`), a.provisioners
		  FROM agents a
		  LEFT JOIN (SELECT lease_holder, count(*)::int AS leases FROM resources
		              WHERE lease_holder IS NOT NULL AND lease_expires_at >= now()
		              GROUP BY lease_holder) l
		         ON l.lease_holder = a.id AND a.heartbeat_at > now() - a.ttl_ms * interval '1 millisecond'
		 ORDER BY a.id COLLATE "C"`, ttl.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Agent, error) {
		var (
			a     domain.Agent
			ageUS int64
		)
		err := row.Scan(&a.ID, &a.Session, &a.Version, &a.HTTPAddr, &a.StartedAt, &a.HeartbeatAt, &a.Live, &ageUS, &a.LeasesHeld, &a.Leader, &a.Schema.Known, &a.Schema.Database, &a.Provisioners)
		a.HeartbeatAge = time.Duration(ageUS) * time.Microsecond
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return out, nil
}

// PruneAgents removes the agents whose last heartbeat is older than olderThan.
func (s *State) PruneAgents(ctx context.Context, olderThan time.Duration) (int64, error) {
	if err := backend.CheckAgentAge("older_than", olderThan); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM agents WHERE heartbeat_at < now() - $1 * interval '1 microsecond'`, olderThan.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("prune agents: %w", err)
	}
	return tag.RowsAffected(), nil
}

// ResourcesOfDeadAgents lists the resources leased by a registered agent that is not live,
// but for the paused ones: nothing is to be done to them until they are resumed, which logs
// a change of its own.
func (s *State) ResourcesOfDeadAgents(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT r.id::text FROM resources r JOIN agents a ON a.id = r.lease_holder
		 WHERE r.lease_holder IS NOT NULL AND NOT r.paused AND `+agentDeadSQL+`
		 ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("list resources of dead agents: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list resources of dead agents: %w", err)
	}
	return out, nil
}

// OverdueResources lists the resources needing attention whose retry is more than
// overdueFor past and whose lease is free or expired. The predicate is that of
// resources_needing_attention_idx, which serves the order too.
func (s *State) OverdueResources(ctx context.Context, overdueFor time.Duration, limit int) ([]string, error) {
	if err := backend.CheckOverdue(overdueFor, limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, overdueSQL, overdueFor.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("list resources whose retry is overdue: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list resources whose retry is overdue: %w", err)
	}
	return out, nil
}

// overdueSQL lists up to $2 resources needing attention whose retry is more than $1
// microseconds past while their lease is free or expired.
const overdueSQL = `
	SELECT id::text FROM resources
	 WHERE ` + backend.NeedsAttentionSQL + `
	   AND next_attempt_at < now() - $1 * interval '1 microsecond'
	   AND (lease_holder IS NULL OR lease_expires_at < now())
	 ORDER BY next_attempt_at, id
	 LIMIT $2`

// QuietResources lists the resources needing attention that have not been written for
// quietFor while their lease is free or expired and no retry is scheduled, a permanent
// failure aside. The rows it reads are those of resources_needing_attention_idx with no
// retry (its key is NULL): in a healthy store, the backlog the agents are working through.
func (s *State) QuietResources(ctx context.Context, quietFor time.Duration, limit int) ([]domain.Attention, error) {
	if err := backend.CheckQuiet(quietFor, limit); err != nil {
		return nil, err
	}
	return s.attention(ctx, "list resources left quiet", quietSQL, quietFor.Microseconds(), limit)
}

// quietSQL lists, with their owners, up to $2 resources needing attention, with no retry scheduled and not failed
// for good, written more than $1 microseconds ago while their lease is free or expired.
const quietSQL = `
	SELECT id::text, owner, next_attempt_at FROM resources
	 WHERE ` + backend.NeedsAttentionSQL + `
	   AND next_attempt_at IS NULL
	   AND NOT (status = 'error' AND last_error <> '')
	   AND updated_at < now() - $1 * interval '1 microsecond'
	   AND (lease_holder IS NULL OR lease_expires_at < now())
	 ORDER BY updated_at, id
	 LIMIT $2`

// deadAgents lists the ids of the registered agents that are not live.
func (s *State) deadAgents(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.id FROM agents a WHERE `+agentDeadSQL)
	if err != nil {
		return nil, fmt.Errorf("list agents that are not live: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list agents that are not live: %w", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// agentDeadSQL is true when the agents row a is not live: its last heartbeat is older than
// its own ttl, on the database clock.
const agentDeadSQL = `a.heartbeat_at <= now() - a.ttl_ms * interval '1 millisecond'`

// leaseFreeSQL is true when the resources row's lease may be taken by the holder in $2: no
// lease, its own, an expired one, or one whose holder is a registered agent that is not live.
const leaseFreeSQL = `(lease_holder IS NULL OR lease_holder = $2 OR lease_expires_at < now()
	OR EXISTS (SELECT 1 FROM agents a WHERE a.id = resources.lease_holder AND ` + agentDeadSQL + `))`
