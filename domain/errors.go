package domain

import "errors"

var (
	// ErrNotFound is returned when a resource (or reservation) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists is returned when a resource with the same owner, type and name exists.
	ErrAlreadyExists = errors.New("already exists")
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
	// ErrSessionEnded is returned when an agent's registration is no longer the one it
	// holds: another process registered the same agent id, or the row was removed.
	ErrSessionEnded = errors.New("agent session ended")
)
