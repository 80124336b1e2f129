package backend

import (
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
)

// Lease is a resource row's lease and guards, read to explain why a guarded write matched
// no row.
type Lease struct {
	Holder    string
	ExpiresAt time.Time
	Live      bool // the lease has not expired by the database's clock, nor its agent died
	// AgentDeadline is when the holder's agent stops being live unless it heartbeats again;
	// zero when the holder is not a registered agent.
	AgentDeadline time.Time
	Generation    int64
	Status        domain.Status
	Provisioner   string
}

// HeldError is the error of a write that needed the lease while l's holder has it.
func (l Lease) HeldError() error {
	expires := l.ExpiresAt
	if !l.AgentDeadline.IsZero() && l.AgentDeadline.Before(expires) {
		expires = l.AgentDeadline
	}
	return &domain.LeaseHeldError{Holder: l.Holder, ExpiresAt: expires, LiveAgent: l.Live && !l.AgentDeadline.IsZero()}
}

// ProgressError says why RecordProgress's u by holder did not apply to the row.
func (l Lease) ProgressError(holder string, u domain.ProgressUpdate) error {
	switch {
	case !l.Live || l.Holder != holder:
		return fmt.Errorf("lease of %s lost: %w", holder, l.HeldError())
	case l.Generation != u.Generation:
		return fmt.Errorf("args changed (generation %d, worked on %d): %w", l.Generation, u.Generation, domain.ErrStale)
	case l.Status == domain.StatusDeleting:
		return fmt.Errorf("a delete was requested: %w", domain.ErrStale)
	default:
		return fmt.Errorf("provisioner is %q, not %q: %w", l.Provisioner, u.Provisioner, domain.ErrStale)
	}
}

// FinalizeError says why FinalizeDelete by holder did not remove the row.
func (l Lease) FinalizeError(holder string) error {
	if l.Status != domain.StatusDeleting {
		return fmt.Errorf("it is %s, not deleting: %w", l.Status, domain.ErrStale)
	}
	return fmt.Errorf("lease of %s lost: %w", holder, l.HeldError())
}

// HealthMovedOn is RecordHealth's error when the row checked at generation is now cur.
func HealthMovedOn(id string, cur domain.Resource, generation int64) error {
	return fmt.Errorf("record health of resource %s: it moved on (status %s, generation %d, observed %d; checked generation %d): %w",
		id, cur.Status, cur.Generation, cur.ObservedGeneration, generation, domain.ErrStale)
}
