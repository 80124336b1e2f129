package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain/internal/backend"
)

// ClaimLeadership takes or renews the leadership lease in one upsert on the writing
// connection, so claimers at once take turns. A file has one agent, which holds the lease
// from its first claim; the rule is the PostgreSQL one all the same. Nothing is inserted or
// updated while the schema is newer than this build knows.
func (s *State) ClaimLeadership(ctx context.Context, agentID string, session int64, ttl time.Duration) (string, bool, error) {
	if err := backend.CheckLeadershipClaim(agentID, session, ttl); err != nil {
		return "", false, err
	}
	var holder string
	err := s.write.QueryRowContext(ctx, `
		INSERT INTO leadership AS l (id, holder, session, acquired_at, expires_at)
		SELECT 1, $1, $2, `+nowSQL+`, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', $3 / 1000.0))
		 WHERE NOT EXISTS (`+backend.SchemaNewerSQL+`$4)
		ON CONFLICT (id) DO UPDATE
		   SET holder = excluded.holder, session = excluded.session,
		       acquired_at = CASE WHEN l.holder = excluded.holder AND l.session = excluded.session
		                          THEN l.acquired_at ELSE excluded.acquired_at END,
		       expires_at = excluded.expires_at
		 WHERE `+leadershipFreeSQL+`
		RETURNING holder`, agentID, session, ttl.Milliseconds(), s.schema).Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		if err := checkSchemaIn(ctx, s.write, s.schema); err != nil {
			return "", false, fmt.Errorf("claim leadership for agent %s: %w", agentID, err)
		}
		err = s.write.QueryRowContext(ctx, backend.LeadershipHolderSQL).Scan(&holder)
		if err == nil {
			return holder, false, nil
		}
	}
	if err != nil {
		return "", false, fmt.Errorf("claim leadership for agent %s: %w", agentID, err)
	}
	return holder, true, nil
}

// ResignLeadership removes the lease when the agent's session holds it.
func (s *State) ResignLeadership(ctx context.Context, agentID string, session int64) error {
	if err := backend.CheckAgentSession(agentID, session); err != nil {
		return err
	}
	if _, err := s.write.ExecContext(ctx, backend.ResignLeadershipSQL, agentID, session); err != nil {
		return fmt.Errorf("resign leadership of agent %s: %w", agentID, err)
	}
	return nil
}

// leadershipFreeSQL is true when the leadership row l may be taken by the agent $1 at
// session $2: it holds it already (or an older session of it does: the agent restarted), the
// lease expired, or its holder is a registered agent that is not live.
const leadershipFreeSQL = `((l.holder = $1 AND l.session <= $2) OR l.expires_at < ` + nowSQL + `
	OR EXISTS (SELECT 1 FROM agents a WHERE a.id = l.holder AND ` + agentDeadSQL + `))`

// leaderSQL is true when the agents row a holds a live leadership lease.
const leaderSQL = `(EXISTS (SELECT 1 FROM leadership ld WHERE ld.holder = a.id AND ld.expires_at >= ` + nowSQL + `)
	AND NOT (` + agentDeadSQL + `))`
