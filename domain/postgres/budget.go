package postgres

import (
	"context"
	"fmt"

	"github.com/berth-dev/berth/domain"
)

// drawBudgetSQL is DrawBudget's one statement. Its SET expressions all read the row as it
// was, so granted and tokens come from the same refill. The refill counts the time since
// refreshed_at on the database clock and never goes back in time: a draw whose transaction
// started before the last one (now() is its start) refills nothing and leaves refreshed_at
// alone, so the refills of a sequence of draws add up to rate * (latest - first) at most.
const drawBudgetSQL = `
	INSERT INTO broker_budgets AS b (provisioner, rate, burst, tokens, refreshed_at, granted, draws)
	VALUES ($1, $2::double precision, $3::integer, $3::integer - LEAST($4::integer, $3::integer), now(), LEAST($4::integer, $3::integer), 1)
	ON CONFLICT (provisioner) DO UPDATE SET
	    rate = EXCLUDED.rate,
	    burst = EXCLUDED.burst,
	    tokens = ` + budgetAvailableSQL + ` - LEAST($4::integer, floor(` + budgetAvailableSQL + `)),
	    granted = LEAST($4::integer, floor(` + budgetAvailableSQL + `))::integer,
	    refreshed_at = GREATEST(b.refreshed_at, EXCLUDED.refreshed_at),
	    draws = b.draws + 1
	RETURNING granted, tokens`

// budgetAvailableSQL is what the bucket holds once refilled, before the draw takes any.
const budgetAvailableSQL = `LEAST(EXCLUDED.burst::double precision,
	    b.tokens + EXCLUDED.rate * GREATEST(0, extract(epoch FROM EXCLUDED.refreshed_at - b.refreshed_at)::double precision))`

// DrawBudget implements domain.BudgetStore: one INSERT ... ON CONFLICT DO UPDATE ...
// RETURNING, which concurrent draws of one bucket serialise on its row.
func (s *State) DrawBudget(ctx context.Context, draw domain.BudgetDraw) (domain.BudgetGrant, error) {
	if err := draw.Check(); err != nil {
		return domain.BudgetGrant{}, fmt.Errorf("draw from the budget of provisioner %q: %w", draw.Provisioner, err)
	}
	var g domain.BudgetGrant
	if err := s.pool.QueryRow(ctx, drawBudgetSQL, draw.Provisioner, draw.Rate, draw.Burst, draw.Want).Scan(&g.Granted, &g.Left); err != nil {
		return domain.BudgetGrant{}, fmt.Errorf("draw %d tokens from the budget of provisioner %q: %w", draw.Want, draw.Provisioner, err)
	}
	return g, nil
}
