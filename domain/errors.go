package domain

import (
	"errors"

	jujuerrors "github.com/juju/errors"
)

// The kinds a caller may meet in any layer are juju/errors' kinds, as in Juju: ErrNotFound is
// errors.NotFound and ErrAlreadyExists is errors.AlreadyExists (the same constant values), so
// errors.Is(err, errors.NotFound) and errors.Is(err, domain.ErrNotFound), with either package's
// Is, are one test. Stores wrap them with context, e.g.
// fmt.Errorf("resource %s: %w", id, domain.ErrNotFound), whose message reads
// "resource <id>: not found". Bad arguments (*FieldError, an unknown resource type) are
// errors.NotValid and a capability the store or environ lacks is errors.NotSupported.
const (
	// ErrNotFound is returned when a resource (or reservation) does not exist.
	ErrNotFound = jujuerrors.NotFound
	// ErrAlreadyExists is returned when a resource with the same owner, type and name exists.
	ErrAlreadyExists = jujuerrors.AlreadyExists
	// ErrForbidden is returned when the database refuses a write to the role that made it:
	// a client's write of a column only the agent writes, or of another owner's row.
	ErrForbidden = jujuerrors.Forbidden
)

// The domain's own conditions, which no juju/errors kind names exactly, are sentinels.
var (
	// ErrStale is returned when a progress update was made against a generation or status
	// that has since moved on (args changed or a delete was requested); the caller re-reads.
	ErrStale = errors.New("resource changed since it was read")
	// ErrConflict is returned when a control makes no sense in the resource's state, e.g.
	// waking or pausing a resource being deleted; the error says why.
	ErrConflict = errors.New("not possible in the resource's current state")
	// ErrLeaseHeld is returned when another agent holds the resource's reconcile lease, and
	// for a write whose lease is no longer the row's (a later claim fenced it).
	ErrLeaseHeld = errors.New("resource is being reconciled by another agent")
	// ErrNoCapacity is returned when no host can take a slot reservation.
	ErrNoCapacity = errors.New("no capacity")
	// ErrNotInstant is returned by a reservation that was to provision its resource whole
	// (SlotRequest.Instant) when the row is not as the caller read it, or not untouched:
	// nothing was written, and the caller provisions the resource the usual way.
	ErrNotInstant = errors.New("resource is not untouched as read: provision it the usual way")
	// ErrSessionEnded is returned when an agent's registration is no longer the one it
	// holds: another process registered the same agent id, or the row was removed.
	ErrSessionEnded = errors.New("agent session ended")
	// ErrNotLeader is returned by a leader-only write whose leadership Term no longer holds:
	// another agent leads now (or the lease expired), and the write changed nothing.
	ErrNotLeader = errors.New("the leadership term the write carried has ended")
)
