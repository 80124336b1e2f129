package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/berth-dev/berth/domain"
)

// drawBudgetSQL is DrawBudget's one statement. Its SET expressions all read the row as it
// was, so granted and tokens come from the same refill. The refill counts whole
// milliseconds between the stored times (the stored form's precision), so the refills of a
// sequence of draws add up to exactly rate * (latest - first), with no rounding that could
// grow with the number of draws. (CAST AS INTEGER is floor: the tokens are never negative.)
const drawBudgetSQL = `
	INSERT INTO broker_budgets AS b (provisioner, rate, burst, tokens, refreshed_at, granted, draws)
	VALUES ($1, $2, $3, $3 - min($4, $3), ` + nowSQL + `, min($4, $3), 1)
	ON CONFLICT (provisioner) DO UPDATE SET
	    rate = excluded.rate,
	    burst = excluded.burst,
	    tokens = ` + budgetAvailableSQL + ` - min($4, CAST(` + budgetAvailableSQL + ` AS INTEGER)),
	    granted = min($4, CAST(` + budgetAvailableSQL + ` AS INTEGER)),
	    refreshed_at = max(b.refreshed_at, excluded.refreshed_at),
	    draws = b.draws + 1
	RETURNING granted, tokens`

// budgetAvailableSQL is what the bucket holds once refilled, before the draw takes any.
const budgetAvailableSQL = `min(CAST(excluded.burst AS REAL),
	    b.tokens + excluded.rate * max(0, round((julianday(excluded.refreshed_at) - julianday(b.refreshed_at)) * 86400000.0) / 1000.0))`

// DrawBudget implements domain.BudgetStore: one upsert in a write transaction, which the
// file's write lock serialises with every other process's draws.
func (s *State) DrawBudget(ctx context.Context, draw domain.BudgetDraw) (domain.BudgetGrant, error) {
	if err := draw.Check(); err != nil {
		return domain.BudgetGrant{}, fmt.Errorf("draw from the budget of provisioner %q: %w", draw.Provisioner, err)
	}
	var g domain.BudgetGrant
	err := s.inQuietTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, drawBudgetSQL, draw.Provisioner, draw.Rate, draw.Burst, draw.Want).Scan(&g.Granted, &g.Left)
	})
	if err != nil {
		return domain.BudgetGrant{}, fmt.Errorf("draw %d tokens from the budget of provisioner %q: %w", draw.Want, draw.Provisioner, describeDBError(err))
	}
	return g, nil
}
