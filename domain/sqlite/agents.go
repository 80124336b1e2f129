package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// nowMillisSQL is the database clock in milliseconds since the Unix epoch.
const nowMillisSQL = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`

// The agents' writes but a resignation touch no change-logged column, so they share the
// group commit's transactions without waking this State's change listeners (inQuietTx).

// RegisterAgent inserts the agent, or starts a new session of a registered id, with the
// schema version this build knows. The session is at least the database clock in
// milliseconds, so it keeps growing across a removal of the row.
func (s *State) RegisterAgent(ctx context.Context, info domain.AgentInfo) (int64, error) {
	if err := backend.CheckAgentInfo(info); err != nil {
		return 0, err
	}
	var session int64
	err := s.inQuietTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `
		INSERT INTO agents AS a (id, session, started_at, heartbeat_at, version, http_addr, ttl_ms, lease_ttl_ms, schema_version)
		VALUES ($1, `+nowMillisSQL+`, `+nowSQL+`, `+nowSQL+`, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE
		   SET session = max(a.session + 1, excluded.session),
		       started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
		       version = excluded.version, http_addr = excluded.http_addr,
		       ttl_ms = excluded.ttl_ms, lease_ttl_ms = excluded.lease_ttl_ms,
		       schema_version = excluded.schema_version
		RETURNING session`, info.ID, info.Version, info.HTTPAddr,
			backend.AgentTTLMillis(info), info.LeaseTTL.Milliseconds(), s.schema).Scan(&session)
	})
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
	err := s.inQuietTx(ctx, func(tx *sql.Tx) error { return heartbeat(ctx, tx, id, session) })
	if err != nil {
		return fmt.Errorf("heartbeat of agent %s: %w", id, err)
	}
	return nil
}

// heartbeat records the heartbeat and renews the leases, in tx.
func heartbeat(ctx context.Context, tx *sql.Tx, id string, session int64) error {
	var leaseTTLMillis int64
	err := tx.QueryRowContext(ctx, `
		UPDATE agents SET heartbeat_at = `+nowSQL+` WHERE id = $1 AND session = $2
		RETURNING lease_ttl_ms`, id, session).Scan(&leaseTTLMillis)
	if errors.Is(err, sql.ErrNoRows) {
		return backend.SessionEnded(id, session)
	}
	if err != nil {
		return err
	}
	if leaseTTLMillis > 0 {
		if _, err := tx.ExecContext(ctx, `
			UPDATE resources SET lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', $2 / 1000.0)),
			       `+touchSQL+`
			 WHERE lease_holder = $1`, id, leaseTTLMillis); err != nil {
			return err
		}
	}
	return nil
}

// ResignAgent removes the row of session and clears the id's leases in one transaction.
func (s *State) ResignAgent(ctx context.Context, id string, session int64) error {
	if err := backend.CheckAgentSession(id, session); err != nil {
		return err
	}
	if err := s.resign(ctx, id, session); err != nil {
		return fmt.Errorf("resign agent %s: %w", id, err)
	}
	return nil
}

// resign runs in a transaction that wakes this State's change listeners: each cleared lease
// is logged as a change, so the resources are taken over at once.
func (s *State) resign(ctx context.Context, id string, session int64) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, backend.DeleteAgentSQL, id, session)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return backend.SessionEnded(id, session)
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO change_log (resource_id, owner) SELECT id, owner FROM resources WHERE lease_holder = $1`, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			UPDATE resources SET lease_holder = NULL, lease_expires_at = NULL, `+touchSQL+`
			 WHERE lease_holder = $1`, id)
		return err
	})
}

// ListAgents returns every agent by id, with its liveness, heartbeat age and live leases on
// the database clock (an agent not live by its own ttl holds none: they are void), and the
// schema version its build knows beside the database's.
func (s *State) ListAgents(ctx context.Context, ttl time.Duration) ([]domain.Agent, error) {
	if err := backend.CheckAgentAge("ttl", ttl); err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, `
		SELECT a.id, a.session, a.version, a.http_addr, a.started_at, a.heartbeat_at,
		       a.heartbeat_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', $1),
		       max(CAST(round((julianday('now') - julianday(a.heartbeat_at)) * 86400000) AS INTEGER), 0),
		       coalesce(l.leases, 0), `+leaderSQL+`,
		       a.schema_version, (`+backend.SchemaVersionSQL+`), a.provisioners
		  FROM agents a
		  LEFT JOIN (SELECT lease_holder, count(*) AS leases FROM resources
		              WHERE lease_holder IS NOT NULL AND lease_expires_at >= `+nowSQL+`
		              GROUP BY lease_holder) l
		         ON l.lease_holder = a.id AND NOT (`+agentDeadSQL+`)
		 ORDER BY a.id`, secondsAgo(ttl))
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rows.Close()
	var out []domain.Agent
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return out, nil
}

func scanAgent(rows *sql.Rows) (domain.Agent, error) {
	var (
		a                  domain.Agent
		started, heartbeat string
		provisioners       string
		ageMS              int64
		err                error
	)
	if err := rows.Scan(&a.ID, &a.Session, &a.Version, &a.HTTPAddr, &started, &heartbeat, &a.Live, &ageMS, &a.LeasesHeld, &a.Leader, &a.Schema.Known, &a.Schema.Database, &provisioners); err != nil {
		return a, err
	}
	if err := json.Unmarshal([]byte(provisioners), &a.Provisioners); err != nil {
		return a, fmt.Errorf("agent %s: provisioners %q is not a JSON array of names: %w", a.ID, provisioners, err)
	}
	a.HeartbeatAge = time.Duration(ageMS) * time.Millisecond
	if a.StartedAt, err = parseTime("started_at", started); err != nil {
		return a, err
	}
	a.HeartbeatAt, err = parseTime("heartbeat_at", heartbeat)
	return a, err
}

// PruneAgents removes the agents whose last heartbeat is older than olderThan.
func (s *State) PruneAgents(ctx context.Context, olderThan time.Duration) (int64, error) {
	if err := backend.CheckAgentAge("older_than", olderThan); err != nil {
		return 0, err
	}
	n, err := s.execQuiet(ctx, `DELETE FROM agents WHERE heartbeat_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', $1)`, secondsAgo(olderThan))
	if err != nil {
		return 0, fmt.Errorf("prune agents: %w", err)
	}
	return n, nil
}

// secondsAgo is the strftime modifier that goes d back.
func secondsAgo(d time.Duration) string {
	return fmt.Sprintf("%+.3f seconds", -d.Seconds())
}

// ResourcesOfDeadAgents lists the resources leased by a registered agent that is not live,
// but for the paused ones: nothing is to be done to them until they are resumed, which logs
// a change of its own.
func (s *State) ResourcesOfDeadAgents(ctx context.Context) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT r.id FROM resources r JOIN agents a ON a.id = r.lease_holder
		 WHERE r.lease_holder IS NOT NULL AND NOT r.paused AND `+agentDeadSQL+`
		 ORDER BY r.id`)
	if err != nil {
		return nil, fmt.Errorf("list resources of dead agents: %w", err)
	}
	out, err := collectRows(rows, func(row rowScanner) (id string, err error) {
		err = row.Scan(&id)
		return id, err
	})
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
	rows, err := s.read.QueryContext(ctx, overdueSQL, secondsAgo(overdueFor), limit)
	if err != nil {
		return nil, fmt.Errorf("list resources whose retry is overdue: %w", err)
	}
	out, err := collectRows(rows, func(row rowScanner) (id string, err error) {
		err = row.Scan(&id)
		return id, err
	})
	if err != nil {
		return nil, fmt.Errorf("list resources whose retry is overdue: %w", err)
	}
	return out, nil
}

// QuietResources lists the resources needing attention that have not been written for
// quietFor while their lease is free or expired and no retry is scheduled, a permanent
// failure aside. SQLite commits one write at a time, so its change log has no entries a
// watcher could skip; the list is the same contract as PostgreSQL's.
func (s *State) QuietResources(ctx context.Context, quietFor time.Duration, limit int) ([]domain.Attention, error) {
	if err := backend.CheckQuiet(quietFor, limit); err != nil {
		return nil, err
	}
	return s.attention(ctx, "list resources left quiet", quietSQL, secondsAgo(quietFor), limit)
}

// quietSQL lists, with their owners, up to $2 resources needing attention, with no retry scheduled and not failed
// for good, written before now moved by the modifier $1 while their lease is free or expired.
const quietSQL = `
	SELECT id, owner, next_attempt_at FROM resources
	 WHERE ` + backend.NeedsAttentionSQL + `
	   AND next_attempt_at IS NULL
	   AND NOT (status = 'error' AND last_error <> '')
	   AND updated_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', $1)
	   AND (lease_holder IS NULL OR lease_expires_at < ` + nowSQL + `)
	 ORDER BY updated_at, id
	 LIMIT $2`

// overdueSQL lists up to $2 resources needing attention whose retry is before now moved by
// the modifier $1 while their lease is free or expired.
const overdueSQL = `
	SELECT id FROM resources
	 WHERE ` + backend.NeedsAttentionSQL + `
	   AND next_attempt_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', $1)
	   AND (lease_holder IS NULL OR lease_expires_at < ` + nowSQL + `)
	 ORDER BY next_attempt_at, id
	 LIMIT $2`

// agentDeadSQL is true when the agents row a is not live: its last heartbeat is older than
// its own ttl, on the database clock.
const agentDeadSQL = `a.heartbeat_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', -a.ttl_ms / 1000.0))`

// agentDeadlineSQL is when the agents row a stops being live unless it heartbeats again.
const agentDeadlineSQL = `strftime('%Y-%m-%dT%H:%M:%fZ', a.heartbeat_at, printf('%+.3f seconds', a.ttl_ms / 1000.0))`

// leaseFreeSQL is true when the resources row's lease may be taken by the holder in
// parameter holderParam: no lease, its own, an expired one, or one whose holder is a
// registered agent that is not live.
func leaseFreeSQL(holderParam string) string {
	return `(lease_holder IS NULL OR lease_holder = ` + holderParam + ` OR lease_expires_at < ` + nowSQL + `
	         OR EXISTS (SELECT 1 FROM agents a WHERE a.id = resources.lease_holder AND ` + agentDeadSQL + `))`
}
