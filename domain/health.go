package domain

import (
	"context"
	"time"
)

// HealthUpdate is what a health check of a provisioned resource records.
type HealthUpdate struct {
	// Status is StatusReady (the check passed), StatusUnhealthy (it failed) or StatusError
	// (the row is unreadable, see Resource.Unreadable: it is not checked until it is fixed).
	Status        Status
	Reason        Reason // HealthCheckFailed, Available or Recovered, UnreadableRow
	StatusMessage string
	// UnhealthySince is when the failing started; it is kept while the resource stays
	// unhealthy (the first value recorded wins) and cleared when it is ready again.
	UnhealthySince time.Time
	State          map[string]any // non-nil: replace the environ state
	Config         map[string]any // non-nil: replace the client config
	// Repairs are what the environ found drifted and put right; each becomes a repair event.
	Repairs []string
}

// Checked is a resource row as a health check read it, and who checked it. The writes such
// a check decides without holding a lease (its RecordHealth, and a repair's slot
// reservation, see SlotRequest.Checked) apply only while the row is still as it was read,
// decided in the write's own transaction: it exists, is ready or unhealthy at Generation
// (and provisioned at it), is not paused, being deleted or hibernated, nor asked to
// hibernate, its lease token is still LeaseToken (no claim since: no reconcile, wake or
// hibernate has moved the resource) and no live lease of another holder than Holder is on
// it. Otherwise nothing is written and the error wraps ErrStale (ErrNotFound when the row
// is gone).
type Checked struct {
	Holder     string // the checking agent's lease identity
	Generation int64
	LeaseToken int64
}

// CheckedBy is r as the check of agent holder (its lease identity) read it.
func (r Resource) CheckedBy(holder string) Checked {
	return Checked{Holder: holder, Generation: r.Generation, LeaseToken: r.LeaseToken}
}

// HealthStore is the health checker's side of the resources table.
type HealthStore interface {
	// ListCheckable returns up to limit resources that are provisioned at their current
	// generation (ready or unhealthy, observed_generation = generation) with an id greater
	// than afterID ("" for the first page), ordered by id. A resource whose reconcile lease
	// is live (on the database clock) and held by another holder than holder, this agent's
	// lease identity, is left out: another agent is reconciling it.
	ListCheckable(ctx context.Context, afterID string, limit int, holder string) ([]Resource, error)
	// RecordHealth applies h to the resource while it is still as checked read it (see
	// Checked) and returns the new row; otherwise (args changed, a delete, a pause, a
	// hibernate, a reconcile or wake claimed it since, another agent's live lease) it gives
	// an error wrapping ErrStale saying which, and ErrNotFound when the row is gone. A
	// change of status is recorded as a health event, each repair as a repair event. An
	// error (an unreadable row) is also logged as a change of the resource, so the agent's
	// provisioner takes the row over and looks at it again until it is fixed.
	RecordHealth(ctx context.Context, id string, checked Checked, h HealthUpdate) (Resource, error)
	// RecordRepairs records each of repairs as a repair event of the resource, in the status
	// it has now, whatever moved it since it was checked: it is for the repairs a check
	// applied whose RecordHealth was refused as stale, which happened all the same. It
	// gives ErrNotFound when the row is gone, and records nothing then.
	RecordRepairs(ctx context.Context, id string, repairs []string) error
	// CountResourcesByStatus counts the resources in each status; statuses without
	// resources are absent.
	CountResourcesByStatus(ctx context.Context) (map[Status]int, error)
	// ListWaitingForCapacity returns up to limit (0: all) pending resources whose reason is
	// ReasonWaitingForCapacity, longest waiting (oldest WaitingSince) first.
	ListWaitingForCapacity(ctx context.Context, limit int) ([]Resource, error)
}

// EventKind says what an event of a resource's history records.
type EventKind string

const (
	// EventStatus is a change of status or status message (and creation, removal).
	EventStatus EventKind = "status"
	// EventError is a failed attempt or a permanent failure.
	EventError EventKind = "error"
	// EventRepair is drift the environ found and put right.
	EventRepair EventKind = "repair"
	// EventHealth is a health check moving the resource between ready and unhealthy.
	EventHealth EventKind = "health"
	// EventControl is a client's control of the resource: pause, resume, hibernate, wake,
	// retry, or a change of its labels.
	EventControl EventKind = "control"
)

// Event is one entry of a resource's history.
type Event struct {
	Seq        int64
	ResourceID string
	At         time.Time
	Kind       EventKind
	Status     Status // the resource's status after the event
	Message    string
}

// EventLog is every resource's history. Status changes are recorded by the backend itself,
// whoever writes the row; events of a removed resource remain until they are pruned.
type EventLog interface {
	// ListEvents returns the resource's newest limit events (limit <= 0: all), oldest first.
	ListEvents(ctx context.Context, resourceID string, limit int) ([]Event, error)
	// PruneEvents deletes, while term holds, the events recorded more than olderThan ago on
	// the database clock, and returns how many (see ChangeLog.PruneChanges).
	PruneEvents(ctx context.Context, term Term, olderThan time.Duration) (int64, error)
	// LatestEventSeq returns the highest event sequence number (0 when there are none).
	LatestEventSeq(ctx context.Context) (int64, error)
	// EventsAfter returns up to limit events of every resource with Seq > after, in Seq
	// order: the feed that watches and waits tail.
	EventsAfter(ctx context.Context, after int64, limit int) ([]Event, error)
	// ListenEvents opens a wake-up channel for new events. As with ListenChanges, wake-ups
	// are hints only: they may be lost or coalesced, and the caller reads EventsAfter.
	ListenEvents(ctx context.Context) (ChangeListener, error)
}
