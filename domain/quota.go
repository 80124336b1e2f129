package domain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Quota caps what one owner holds on one provisioner. A nil maximum leaves that measure
// uncapped. A quota below the owner's usage is allowed: nothing is evicted, and the owner's
// next admissions on the provisioner wait until its usage drops below the quota.
type Quota struct {
	Owner       string
	Provisioner string
	// MaxResources caps how many of the owner's resources the provisioner holds.
	MaxResources *int64
	// MaxSlots caps the sum of their units, in the environ's own unit (a runtime's slots).
	MaxSlots  *int64
	UpdatedAt time.Time
}

// QuotaUsage is a quota with what its owner holds on its provisioner: the count and units
// of the owner's resources admitted there.
type QuotaUsage struct {
	Quota
	Resources int64
	Slots     int64
}

// QuotaChange sets the caps of one owner on one provisioner. A measure whose Set is false
// keeps the cap it had (none, for a new quota); one whose Set is true takes Max, nil
// removing that cap.
type QuotaChange struct {
	Owner       string
	Provisioner string
	Resources   QuotaLimit
	Slots       QuotaLimit
}

// QuotaLimit is one measure of a QuotaChange.
type QuotaLimit struct {
	Set bool
	Max *int64 // nil: no cap
}

// QuotaFilter narrows ListQuotas; empty fields match every quota.
type QuotaFilter struct {
	Owner       string
	Provisioner string
}

// Admission asks to admit a resource at Units on Provisioner (its canonical name), against
// its owner's quota there.
type Admission struct {
	Provisioner string
	// Units is what the resource needs, in the environ's own unit (0 when its size is not
	// known: it then counts as a resource only).
	Units int64
	// Lower says the broker applied a shrink: an admission at more units on the same
	// provisioner is lowered to Units. Without it an admission at more units is kept, so
	// that a resize the broker has not applied yet frees nothing.
	Lower bool
	// Defer lets an owner without a quota on the provisioner be admitted with the attempt's
	// next progress write (ProgressUpdate.Admission) instead of a write of its own: the
	// store then records nothing and answers ErrAdmissionDeferred. An owner with a quota
	// there is admitted as without Defer.
	Defer bool
}

// ErrAdmissionDeferred is AdmitResource's answer to an Admission with Defer for an owner
// without a quota on the provisioner: nothing was written, and the caller records the
// admission with its next progress write (ProgressUpdate.Admission).
var ErrAdmissionDeferred = errors.New("admission deferred to the next progress write: the owner has no quota on the provisioner")

// QuotaStore holds the owner quotas and admits resources against them.
type QuotaStore interface {
	// SetQuota applies c and returns the quota with its owner's usage. A negative maximum
	// is a *FieldError; an empty owner or provisioner too. In the same write it wakes the
	// owner's resources that wait for quota on the provisioner (their retry becomes due and
	// a change is logged), so a quota that rises lets them proceed at once. On PostgreSQL
	// only the agent's role may write quotas: a client role gets ErrForbidden.
	SetQuota(ctx context.Context, c QuotaChange) (QuotaUsage, error)
	// RemoveQuota removes the owner's quota on the provisioner, waking its waiting
	// resources as SetQuota does; a quota that does not exist gives ErrNotFound.
	RemoveQuota(ctx context.Context, owner, provisioner string) error
	// ListQuotas returns the quotas f matches with their owners' usage, ordered by owner
	// and provisioner.
	ListQuotas(ctx context.Context, f QuotaFilter) ([]QuotaUsage, error)
	// AdmitResource admits resource id at a.Units on a.Provisioner while lease is the row's
	// live lease (else an error wrapping ErrLeaseHeld, as RecordProgress) and returns the
	// units it is admitted at. A resource already admitted there at a.Units or more keeps
	// its admission (lowered to a.Units when a.Lower says so) and needs no quota. Otherwise,
	// in one transaction, the owner's quota row on the provisioner is locked, the owner's
	// admitted usage there summed without the resource, and the admission recorded unless
	// it would take the usage past a cap: then it gives a *QuotaExceededError and records
	// nothing. No quota row admits at once (or, with a.Defer, writes nothing and gives
	// ErrAdmissionDeferred). The lock serializes the admissions of one owner
	// on one provisioner across agents, so no two of them land over the quota together.
	AdmitResource(ctx context.Context, id string, lease Lease, a Admission) (int64, error)
}

// QuotaExceededError is an admission that would take its owner past a quota: the resource
// waits (ReasonQuotaExceeded) until the owner's usage drops or the quota rises.
type QuotaExceededError struct {
	Quota Quota
	// Resources and Slots are the owner's usage on the provisioner, without the resource.
	Resources, Slots int64
	// Needs is the units the resource asks for.
	Needs int64
}

func (e *QuotaExceededError) Error() string {
	var parts []string
	if m := e.Quota.MaxResources; m != nil {
		parts = append(parts, fmt.Sprintf("%d of %d resources", e.Resources, *m))
	}
	if m := e.Quota.MaxSlots; m != nil {
		parts = append(parts, fmt.Sprintf("%d of %d slots", e.Slots, *m))
	}
	return fmt.Sprintf("owner %q on provisioner %q: %s; this resource needs %s",
		e.Quota.Owner, e.Quota.Provisioner, strings.Join(parts, ", "), countOf(e.Needs, "slot"))
}

// Admits reports whether the quota q leaves room, beside the usage resources and slots, for
// one more resource of needs units.
func (q Quota) Admits(resources, slots, needs int64) bool {
	if q.MaxResources != nil && resources+1 > *q.MaxResources {
		return false
	}
	return q.MaxSlots == nil || slots+needs <= *q.MaxSlots
}

// CheckQuotaChange says what is wrong with c, naming the field: an empty owner or
// provisioner, or a negative maximum.
func CheckQuotaChange(c QuotaChange) error {
	switch {
	case c.Owner == "":
		return &FieldError{Field: "owner", Msg: "must not be empty: name the owner the quota caps"}
	case c.Provisioner == "":
		return &FieldError{Field: "provisioner", Msg: "must not be empty: name the provisioner the quota applies on"}
	case c.Resources.Max != nil && *c.Resources.Max < 0:
		return &FieldError{Field: "resources", Msg: fmt.Sprintf("must be 0 or more, got %d (remove the cap with none)", *c.Resources.Max)}
	case c.Slots.Max != nil && *c.Slots.Max < 0:
		return &FieldError{Field: "slots", Msg: fmt.Sprintf("must be 0 or more, got %d (remove the cap with none)", *c.Slots.Max)}
	}
	return nil
}

// CheckAdmission says what is wrong with a, naming the field.
func CheckAdmission(a Admission) error {
	switch {
	case a.Provisioner == "":
		return &FieldError{Field: "provisioner", Msg: "must not be empty: admit the resource on its provisioner"}
	case a.Units < 0:
		return &FieldError{Field: "units", Msg: fmt.Sprintf("must be 0 or more, got %d", a.Units)}
	}
	return nil
}

func countOf(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
