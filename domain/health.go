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
	StatusMessage string
	// UnhealthySince is when the failing started; it is kept while the resource stays
	// unhealthy (the first value recorded wins) and cleared when it is ready again.
	UnhealthySince time.Time
	State          map[string]any // non-nil: replace the environ state
	Config         map[string]any // non-nil: replace the client config
	// Repairs are what the environ found drifted and put right; each becomes a repair event.
	Repairs []string
}

// HealthStore is the health checker's side of the resources table.
type HealthStore interface {
	// ListCheckable returns up to limit resources that are provisioned at their current
	// generation (ready or unhealthy, observed_generation = generation) with an id greater
	// than afterID ("" for the first page), ordered by id. A resource whose reconcile lease
	// is live (on the database clock) and held by another holder than holder, this agent's
	// lease identity, is left out: another agent is reconciling it.
	ListCheckable(ctx context.Context, afterID string, limit int, holder string) ([]Resource, error)
	// RecordHealth applies h to the resource while it is still at generation, provisioned at
	// it, ready or unhealthy and not paused, and returns the new row; otherwise (args
	// changed, a delete, a pause or a reconcile started) it gives ErrStale, and ErrNotFound when the row is gone. A
	// change of status is recorded as a health event, each repair as a repair event. An
	// error (an unreadable row) is also logged as a change of the resource, so the agent's
	// provisioner takes the row over and looks at it again until it is fixed.
	RecordHealth(ctx context.Context, id string, generation int64, h HealthUpdate) (Resource, error)
	// CountResourcesByStatus counts the resources in each status; statuses without
	// resources are absent.
	CountResourcesByStatus(ctx context.Context) (map[Status]int, error)
	// ListWaitingForCapacity returns up to limit (0: all) pending resources whose status
	// message starts with WaitingForCapacityPrefix, longest waiting (oldest) first.
	ListWaitingForCapacity(ctx context.Context, limit int) ([]Resource, error)
}

// WaitingForCapacityPrefix starts the status message of a pending resource that waits for
// room on its provisioner.
const WaitingForCapacityPrefix = "waiting for capacity"

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
