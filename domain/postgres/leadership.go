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

// asLeader runs f in a transaction that first checks that term holds and keeps it holding
// until the transaction ends: it share-locks the leadership row, which a claim must lock to
// take it over. A term that no longer holds gives an error wrapping domain.ErrNotLeader
// before f runs.
func (s *State) asLeader(ctx context.Context, term domain.Term, f func(tx pgx.Tx) error) error {
	if err := backend.CheckTerm(term); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var holder string
		err := tx.QueryRow(ctx, termHoldsSQL, term.Holder, term.Session).Scan(&holder)
		if errors.Is(err, pgx.ErrNoRows) {
			return backend.TermEnded(term)
		}
		if err != nil {
			return fmt.Errorf("check the leadership term: %w", err)
		}
		return f(tx)
	})
}

// termHoldsSQL reads and share-locks the leadership row while agent $1 holds it in session
// $2: the lease has not expired and the agent is live, on the database clock.
const termHoldsSQL = `
	SELECT l.holder FROM leadership l
	 WHERE l.id = 1 AND l.holder = $1 AND l.session = $2 AND l.expires_at >= now()
	   AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = l.holder AND ` + agentDeadSQL + `)
	   FOR SHARE OF l`

// prune deletes, while term holds, p's rows written more than olderThan ago on the database
// clock, and returns how many.
func (s *State) prune(ctx context.Context, term domain.Term, p backend.Prunable, olderThan time.Duration) (int64, error) {
	if err := backend.CheckRetention(olderThan); err != nil {
		return 0, err
	}
	var n int64
	err := s.asLeader(ctx, term, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM `+p.Table+` WHERE `+p.Column+` < now() - $1 * interval '1 millisecond'`, olderThan.Milliseconds())
		n = tag.RowsAffected()
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
const leadershipFreeSQL = `((l.holder = $1 AND l.session <= $2) OR l.expires_at < now()
	OR EXISTS (SELECT 1 FROM agents a WHERE a.id = l.holder AND ` + agentDeadSQL + `))`

// leaderSQL is true when the agents row a holds a live leadership lease.
const leaderSQL = `(EXISTS (SELECT 1 FROM leadership ld WHERE ld.holder = a.id AND ld.expires_at >= now())
	AND NOT (` + agentDeadSQL + `))`
