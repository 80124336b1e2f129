package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain/internal/backend"
)

// ClaimLeadership takes or renews the leadership lease in one upsert: the row lock makes
// claimers at once take turns, and each sees what the one before it wrote. Nothing is
// inserted or updated while the schema is newer than this build knows.
func (s *State) ClaimLeadership(ctx context.Context, agentID string, session int64, ttl time.Duration) (string, bool, error) {
	if err := backend.CheckLeadershipClaim(agentID, session, ttl); err != nil {
		return "", false, err
	}
	var holder string
	err := s.pool.QueryRow(ctx, `
		INSERT INTO leadership AS l (id, holder, session, acquired_at, expires_at)
		SELECT 1, $1, $2, now(), now() + $3 * interval '1 millisecond'
		 WHERE NOT EXISTS (`+backend.SchemaNewerSQL+`$4)
		ON CONFLICT (id) DO UPDATE
		   SET holder = EXCLUDED.holder, session = EXCLUDED.session,
		       acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.session = EXCLUDED.session
		                          THEN l.acquired_at ELSE now() END,
		       expires_at = EXCLUDED.expires_at
		 WHERE `+leadershipFreeSQL+`
		RETURNING holder`, agentID, session, ttl.Milliseconds(), s.schema).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		if err := s.schemaError(ctx); err != nil {
			return "", false, fmt.Errorf("claim leadership for agent %s: %w", agentID, err)
		}
		err = s.pool.QueryRow(ctx, backend.LeadershipHolderSQL).Scan(&holder)
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
	if _, err := s.pool.Exec(ctx, backend.ResignLeadershipSQL, agentID, session); err != nil {
		return fmt.Errorf("resign leadership of agent %s: %w", agentID, err)
	}
	return nil
}

// leadershipFreeSQL is true when the leadership row l may be taken by the agent $1 at
// session $2: it holds it already (or an older session of it does: the agent restarted), the
// lease expired, or its holder is a registered agent that is not live.
const leadershipFreeSQL = `((l.holder = $1 AND l.session <= $2) OR l.expires_at < now()
	OR EXISTS (SELECT 1 FROM agents a WHERE a.id = l.holder AND ` + agentDeadSQL + `))`

// leaderSQL is true when the agents row a holds a live leadership lease.
const leaderSQL = `(EXISTS (SELECT 1 FROM leadership ld WHERE ld.holder = a.id AND ld.expires_at >= now())
	AND NOT (` + agentDeadSQL + `))`
