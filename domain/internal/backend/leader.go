package backend

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
)

// CheckTerm checks the leadership term a leader-only write carries.
func CheckTerm(term domain.Term) error {
	return CheckAgentSession(term.Holder, term.Session)
}

// TermEnded is the error of a leader-only write whose term no longer holds.
func TermEnded(term domain.Term) error {
	return fmt.Errorf("agent %s (session %d) no longer holds the leadership: %w", term.Holder, term.Session, domain.ErrNotLeader)
}

// Prunable is a table the leader prunes by age.
type Prunable struct {
	What   string // what pruning it is called in errors
	Table  string
	Column string // the time each row was written, on the database clock
}

// The tables the leader prunes.
var (
	PrunableChanges         = Prunable{"prune change log", "change_log", "created_at"}
	PrunableEvents          = Prunable{"prune resource events", "resource_events", "at"}
	PrunableCapacitySamples = Prunable{"prune capacity samples", "capacity_samples", "at"}
)

// CheckRetention checks how old a pruned row must be: at least a millisecond, the
// precision both dialects keep.
func CheckRetention(olderThan time.Duration) error {
	if olderThan < time.Millisecond {
		return &domain.FieldError{Field: "olderThan", Msg: fmt.Sprintf("must be at least 1ms, got %s: pass the retention the agent was configured with", olderThan)}
	}
	return nil
}
