package domain

import (
	"context"
	"fmt"
	"math"
)

// BudgetDraw asks a provisioner's shared rate budget for tokens: the calls its environ may
// make to the system it drives (for Kubernetes, API requests), shared by every agent.
type BudgetDraw struct {
	Provisioner string
	// Rate is how many tokens the bucket gains a second; Burst the most it holds. Every
	// draw carries the caller's, and the bucket takes them: agents that run one spec agree,
	// and a reloaded spec takes effect with its first draw.
	Rate  float64
	Burst int
	// Want is how many tokens the caller asks for, at least 1.
	Want int
}

// Check says what is wrong with d, naming the field and the fix.
func (d BudgetDraw) Check() error {
	switch {
	case d.Provisioner == "":
		return &FieldError{Field: "provisioner", Msg: "must not be empty: name the provisioner whose budget to draw from"}
	case math.IsNaN(d.Rate) || math.IsInf(d.Rate, 0) || d.Rate <= 0:
		return &FieldError{Field: "rate", Msg: fmt.Sprintf("must be a positive number of tokens a second, got %v", d.Rate)}
	case d.Burst < 1:
		return &FieldError{Field: "burst", Msg: fmt.Sprintf("must be at least 1 token, got %d", d.Burst)}
	case d.Want < 1:
		return &FieldError{Field: "want", Msg: fmt.Sprintf("must be at least 1 token, got %d", d.Want)}
	}
	return nil
}

// BudgetGrant is what a draw got.
type BudgetGrant struct {
	// Granted is how many whole tokens the draw took: min(Want, the tokens in the bucket).
	Granted int
	// Left is what the bucket holds after the draw, a fraction of a token included: a
	// caller granted less than it wants waits about (wanted - Left) / Rate seconds before it
	// asks again.
	Left float64
}

// BudgetStore holds the token buckets of the provisioners' shared rate budgets, one row per
// provisioner, so that every agent draws from the same bucket.
//
// A bucket starts full (Burst tokens) and refills at Rate tokens a second of the database's
// clock, up to Burst. Whatever the number of agents and stores drawing at once, the tokens
// granted from a bucket between two moments t0 < t1 are never more than
// Burst + Rate*(t1-t0): each draw refills and takes in one statement, serialised on the
// bucket's row (or the database file's write lock).
type BudgetStore interface {
	// DrawBudget refills the provisioner's bucket by the time elapsed since its last draw,
	// caps it at the draw's Burst, and takes min(Want, whole tokens held) from it, creating
	// the bucket (full) on the first draw. It is one statement, one round trip.
	DrawBudget(ctx context.Context, draw BudgetDraw) (BudgetGrant, error)
}
