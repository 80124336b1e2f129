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
	Token     int64
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

// Holds reports whether lease is the row's lease and live.
func (l Lease) Holds(lease domain.Lease) bool {
	return l.Live && l.Holder == lease.Holder && l.Token == lease.Token
}

// LostError is the error of a write under lease that is no longer the row's live lease.
func (l Lease) LostError(lease domain.Lease) error {
	return fmt.Errorf("lease of %s (claim %d) lost: %w", lease.Holder, lease.Token, l.HeldError())
}

// ProgressError says why RecordProgress's u under lease did not apply to the row.
func (l Lease) ProgressError(lease domain.Lease, u domain.ProgressUpdate) error {
	switch {
	case !l.Holds(lease):
		return l.LostError(lease)
	case l.Generation != u.Generation:
		return fmt.Errorf("args changed (generation %d, worked on %d): %w", l.Generation, u.Generation, domain.ErrStale)
	case l.Status == domain.StatusDeleting:
		return fmt.Errorf("a delete was requested: %w", domain.ErrStale)
	default:
		return fmt.Errorf("provisioner is %q, not %q: %w", l.Provisioner, u.Provisioner, domain.ErrStale)
	}
}

// FinalizeError says why FinalizeDelete under lease did not remove the row.
func (l Lease) FinalizeError(lease domain.Lease) error {
	if l.Status != domain.StatusDeleting && l.Holds(lease) {
		return fmt.Errorf("it is %s, not deleting: %w", l.Status, domain.ErrStale)
	}
	return l.LostError(lease)
}

// SlotsError is the error of a slot write under lease (nil: none) that the row's lease l
// refuses, or nil when it allows it: one under a lease needs the row to still have that
// lease's holder and token, one under none needs the row's lease not to be live.
func (l Lease) SlotsError(lease *domain.Lease) error {
	switch {
	case lease != nil && (l.Holder != lease.Holder || l.Token != lease.Token):
		return l.LostError(*lease)
	case lease == nil && l.Live && l.Holder != "":
		return fmt.Errorf("the resource is being reconciled: %w", l.HeldError())
	}
	return nil
}

// LeaseTakeover is the domain.Takeover of a claim by holder of a row whose lease previous
// held (nil, or holder itself: none); waited is how long its work had waited.
func LeaseTakeover(holder string, previous *string, waited time.Duration) *domain.Takeover {
	if previous == nil || *previous == "" || *previous == holder {
		return nil
	}
	return &domain.Takeover{PreviousHolder: *previous, Waited: max(waited, 0)}
}

// HealthMovedOn is RecordHealth's error when the row checked at generation is now cur.
func HealthMovedOn(id string, cur domain.Resource, generation int64) error {
	paused := ""
	if cur.Paused {
		paused = ", paused"
	}
	return fmt.Errorf("record health of resource %s: it moved on (status %s%s, generation %d, observed %d; checked generation %d): %w",
		id, cur.Status, paused, cur.Generation, cur.ObservedGeneration, generation, domain.ErrStale)
}
