package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// ClaimLeadership takes or renews the leadership lease in one upsert in a write transaction
// (the group commit's), so claimers at once take turns. A file has one agent, which holds
// the lease from its first claim; the rule is the PostgreSQL one all the same. Nothing is
// inserted or updated while the schema is newer than this build knows.
func (s *State) ClaimLeadership(ctx context.Context, agentID string, session int64, ttl time.Duration) (string, bool, error) {
	if err := backend.CheckLeadershipClaim(agentID, session, ttl); err != nil {
		return "", false, err
	}
	var holder string
	var claimed bool
	err := s.inQuietTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `
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
		if !errors.Is(err, sql.ErrNoRows) {
			claimed = err == nil
			return err
		}
		if err := checkSchemaIn(ctx, tx, s.schema); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, backend.LeadershipHolderSQL).Scan(&holder)
	})
	if err != nil {
		return "", false, fmt.Errorf("claim leadership for agent %s: %w", agentID, err)
	}
	return holder, claimed, nil
}

// ResignLeadership removes the lease when the agent's session holds it.
func (s *State) ResignLeadership(ctx context.Context, agentID string, session int64) error {
	if err := backend.CheckAgentSession(agentID, session); err != nil {
		return err
	}
	if _, err := s.execQuiet(ctx, backend.ResignLeadershipSQL, agentID, session); err != nil {
		return fmt.Errorf("resign leadership of agent %s: %w", agentID, err)
	}
	return nil
}

// asLeader runs f in a write transaction that first checks that term holds: the write lock
// keeps any claim from taking the leadership over until it ends. A term that no longer holds
// gives an error wrapping domain.ErrNotLeader before f runs.
func (s *State) asLeader(ctx context.Context, term domain.Term, f func(tx *sql.Tx) error) error {
	if err := backend.CheckTerm(term); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var holds bool
		if err := tx.QueryRowContext(ctx, termHoldsSQL, term.Holder, term.Session).Scan(&holds); err != nil {
			return fmt.Errorf("check the leadership term: %w", err)
		}
		if !holds {
			return backend.TermEnded(term)
		}
		return f(tx)
	})
}

// termHoldsSQL is true while agent $1 holds the leadership in session $2: the lease has not
// expired and the agent is live, on the database clock.
const termHoldsSQL = `
	SELECT EXISTS (SELECT 1 FROM leadership l
	 WHERE l.id = 1 AND l.holder = $1 AND l.session = $2 AND l.expires_at >= ` + nowSQL + `
	   AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = l.holder AND ` + agentDeadSQL + `))`

// prune deletes, while term holds, p's rows written more than olderThan ago on the database
// clock, and returns how many.
func (s *State) prune(ctx context.Context, term domain.Term, p backend.Prunable, olderThan time.Duration) (int64, error) {
	if err := backend.CheckRetention(olderThan); err != nil {
		return 0, err
	}
	var n int64
	err := s.asLeader(ctx, term, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM `+p.Table+` WHERE `+p.Column+
			` < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', -$1 / 1000.0))`, olderThan.Milliseconds())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.What, err)
	}
	return n, nil
}

// leadershipFreeSQL is true when the leadership row l may be taken by the agent $1 at
// session $2: it holds it already (or an older session of it does: the agent restarted), the
// lease expired, or its holder is a registered agent that is not live.
const leadershipFreeSQL = `((l.holder = $1 AND l.session <= $2) OR l.expires_at < ` + nowSQL + `
	OR EXISTS (SELECT 1 FROM agents a WHERE a.id = l.holder AND ` + agentDeadSQL + `))`

// leaderSQL is true when the agents row a holds a live leadership lease.
const leaderSQL = `(EXISTS (SELECT 1 FROM leadership ld WHERE ld.holder = a.id AND ld.expires_at >= ` + nowSQL + `)
	AND NOT (` + agentDeadSQL + `))`
