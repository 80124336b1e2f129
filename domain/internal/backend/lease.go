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
	// ObservedGeneration, Paused and Hibernate are the row's, for the writes a health check
	// decides (CheckedError).
	ObservedGeneration int64
	Paused             bool
	Hibernate          bool
}

// CheckedError says why a write decided by the health check that read the row as checked
// may not apply to the row whose lease and guards are l, or nil when it may (see
// domain.Checked). Each refusal wraps domain.ErrStale.
func (l Lease) CheckedError(checked domain.Checked) error {
	var why string
	switch {
	case l.Status != domain.StatusReady && l.Status != domain.StatusUnhealthy:
		why = "it is " + string(l.Status)
	case l.Paused:
		why = "it was paused"
	case l.Hibernate:
		why = "it was asked to hibernate"
	case l.Generation != checked.Generation:
		why = fmt.Sprintf("its args changed (generation %d, checked %d)", l.Generation, checked.Generation)
	case l.ObservedGeneration != l.Generation:
		why = fmt.Sprintf("generation %d is not provisioned yet", l.Generation)
	case l.Token != checked.LeaseToken:
		why = fmt.Sprintf("it was claimed since it was checked (claim %d, checked at %d): a reconcile, wake or hibernate may have moved it", l.Token, checked.LeaseToken)
	case l.Live && l.Holder != "" && l.Holder != checked.Holder:
		return fmt.Errorf("the resource moved on since it was checked: %w (%w)", domain.ErrStale, l.HeldError())
	default:
		return nil
	}
	return fmt.Errorf("the resource moved on since it was checked: %s: %w", why, domain.ErrStale)
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

// HealthRefused is RecordHealth's error when its write, decided by the check that read the
// resource id as checked, matched no row, and the row's lease and guards are now l. Should
// l allow the write (the row changed back meanwhile) the record is still dropped: the next
// round checks again.
func HealthRefused(id string, l Lease, checked domain.Checked) error {
	err := l.CheckedError(checked)
	if err == nil {
		err = fmt.Errorf("the resource changed while its check was recorded: %w", domain.ErrStale)
	}
	return fmt.Errorf("record health of resource %s: %w", id, err)
}

// SlotsFenceError is the error of a slot write under lease (nil: none), decided under none
// by the check that read the row as checked (nil: none), on a row whose lease and guards
// are l, or whose read gave notFound (an error wrapping domain.ErrNotFound; nil when the
// row exists); nil when the write may apply. A row that is gone refuses a write under a
// lease or a check and allows one under neither (an orphan's release).
func SlotsFenceError(l Lease, notFound error, lease *domain.Lease, checked *domain.Checked) error {
	switch {
	case notFound != nil && lease != nil:
		return fmt.Errorf("lease of %s (claim %d) lost: %w", lease.Holder, lease.Token, notFound)
	case notFound != nil && checked != nil:
		return fmt.Errorf("the resource is gone since it was checked: %w", notFound)
	case notFound != nil:
		return nil
	case checked != nil:
		return l.CheckedError(*checked)
	}
	return l.SlotsError(lease)
}
