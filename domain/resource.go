package domain

import (
	"strings"
	"time"
)

// ResourceType is the name of a kind of resource ("runtime"). The domain keeps it as a name:
// the environs declare the types they serve, with their args and how to check them, and the
// agent's registry of environs says which names are served (see environ.Catalog). Nothing
// here changes when a type is added.
type ResourceType string

// The names of the types Berth ships with (see environ/runtime and environ/kubernetes), for
// the code and tests that name one.
const (
	// ResourceTypeRuntime is an instance on a runtime host.
	ResourceTypeRuntime ResourceType = "runtime"
	// ResourceTypeClickHouse is a ClickHouse database.
	ResourceTypeClickHouse ResourceType = "clickhouse"
)

// Status is a resource's place in the reconcile state machine (see the package doc).
type Status string

const (
	StatusPending      Status = "pending"
	StatusProvisioning Status = "provisioning"
	StatusReady        Status = "ready"
	// StatusUnhealthy is a ready resource whose health check fails; it is not deprovisioned
	// and returns to ready when the check passes again.
	StatusUnhealthy Status = "unhealthy"
	StatusError     Status = "error"
	StatusDeleting  Status = "deleting"
	// StatusHibernating is a resource whose environ is being asked to stop it while keeping
	// its data and identity (Resource.Hibernate was set).
	StatusHibernating Status = "hibernating"
	// StatusHibernated is a resource stopped with its data kept: it holds as little as its
	// environ can (no slots, no running workload) until it is woken.
	StatusHibernated Status = "hibernated"
)

// Statuses lists every status.
var Statuses = []Status{StatusPending, StatusProvisioning, StatusReady, StatusUnhealthy, StatusError, StatusDeleting, StatusHibernating, StatusHibernated}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, known := range Statuses {
		if s == known {
			return true
		}
	}
	return false
}

// Resource is one row of the resources table.
type Resource struct {
	ID          string
	Type        ResourceType
	Name        string
	Owner       string
	Provisioner string // empty until the agent pins the default provisioner

	Args               map[string]any // desired, set by clients
	Generation         int64          // bumped on every change of Args
	ObservedGeneration int64          // the generation last brought to ready

	Status Status
	// Reason says why the resource is in Status, from Status's closed list (ReasonsByStatus);
	// "" only on rows written before reasons existed and not touched since.
	Reason        Reason
	StatusMessage string // for people only: no code reads it back
	StateTimes

	State  map[string]any // private to the environ
	Config map[string]any // what clients use to reach the resource

	Attempts      int        // failed attempts since the last success or args change
	NextAttemptAt *time.Time // when the next retry is due; nil when none is scheduled
	LastError     string

	// LeaseToken counts the claims of the row's reconcile lease; a write under a Lease
	// applies only while it is still the lease's token (see ReconcileStore.ClaimResource).
	LeaseToken int64

	CreatedAt time.Time
	UpdatedAt time.Time
	ReadyAt   *time.Time // first time the resource became ready
	// UnhealthySince is when the resource started failing its health check; nil unless it is
	// unhealthy.
	UnhealthySince *time.Time

	// Labels are the client's key/value tags (see ValidateLabels); list filters select by
	// them and the Kubernetes environ puts them on the objects it makes.
	Labels map[string]string
	// Paused stops the agent from doing anything to the resource (no reconcile, repair,
	// health check or delete) until it is resumed; changes made meanwhile are applied then.
	Paused bool
	// Hibernate is the client's wish that the resource be hibernated (true) or running
	// (false); Status says how far the agent got.
	Hibernate bool
	// RetryRequestedAt is when a client last asked for the resource to be retried at once
	// (nil: never); asking clears its backoff and permanent failure.
	RetryRequestedAt *time.Time
	// StatusChangedAt is when the status last changed (the creation time until it does):
	// the last transition time of the resource's conditions.
	StatusChangedAt time.Time
	// LeaseHolder is the agent holding (or last holding) the reconcile lease, "" when none
	// was ever taken or it was released; LeaseExpiresAt is when that lease ends.
	LeaseHolder    string
	LeaseExpiresAt *time.Time

	// Unreadable lists the JSON columns (args, state, config) the backend could not decode;
	// each of them is nil in the fields above. Empty for every row Berth wrote itself.
	Unreadable []UnreadableColumn
}

// UpToDate reports whether the resource was brought to its current generation and is still
// provisioned (ready, or unhealthy: health is the health checker's business, not a reason to
// provision again).
func (r Resource) UpToDate() bool {
	return (r.Status == StatusReady || r.Status == StatusUnhealthy) && r.ObservedGeneration == r.Generation
}

// Readable reports whether every JSON column of the row could be decoded. A row written by
// another client (plain SQL) may hold JSON Berth cannot read; such a row is still listed and
// can be deleted, but nothing is provisioned from it until it is fixed (see Unreadable).
func (r Resource) Readable() bool { return len(r.Unreadable) == 0 }

// UnreadableReason joins the reasons of r's unreadable columns into one message ("" when
// the row reads fine).
func (r Resource) UnreadableReason() string {
	msgs := make([]string, len(r.Unreadable))
	for i, c := range r.Unreadable {
		msgs[i] = c.Error()
	}
	return strings.Join(msgs, "; ")
}

// ArgsUnreadable reports whether the args column is among r's unreadable columns.
func (r Resource) ArgsUnreadable() bool {
	for _, c := range r.Unreadable {
		if c.Column == "args" {
			return true
		}
	}
	return false
}
