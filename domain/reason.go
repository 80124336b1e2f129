package domain

import "time"

// Reason says, in one CamelCase word a program can match on, why a resource is in its
// status. The agent writes it in the same statement as the status; the status message says
// the same for a person and no code reads it back. Each status has a closed list of reasons
// (ReasonsByStatus); the package doc lists them with their meaning.
type Reason string

// Reasons of status pending.
const (
	// ReasonCreated is a row no attempt has touched yet.
	ReasonCreated Reason = "Created"
	// ReasonWaitingForCapacity is a resource its broker has no room for; it is retried
	// with backoff and when room frees (Resource.WaitingSince says since when).
	ReasonWaitingForCapacity Reason = "WaitingForCapacity"
)

// ReasonQuotaExceeded is a create (status pending) or a resize (status ready, serving at
// its observed generation meanwhile) that would take its owner past a quota set on its
// provisioner: it waits, retried with backoff and when the owner's usage drops or the
// quota rises (Resource.WaitingSince says since when).
const ReasonQuotaExceeded Reason = "QuotaExceeded"

// ReasonBrokerUnavailable is a resource whose provisioner's circuit breaker is open: its
// broker failed repeatedly (429, 5xx, timeouts, refused connections), so no agent calls
// it until the next probe says it has recovered. It is a reason of pending,
// provisioning, deleting and hibernating, and of ready for a resize that waits while the
// resource serves its observed generation (Resource.WaitingSince says since when).
const ReasonBrokerUnavailable Reason = "BrokerUnavailable"

// Reasons of status provisioning (Backoff too, see below).
const (
	// ReasonProvisioning is an attempt creating, updating or waking the resource.
	ReasonProvisioning Reason = "Provisioning"
	// ReasonAwaitingReady is a resource its broker has applied, waited on until it serves.
	ReasonAwaitingReady Reason = "AwaitingReady"
)

// ReasonBackoff is an attempt that failed and is retried at Resource.NextAttemptAt; it is a
// reason of provisioning, deleting and hibernating.
const ReasonBackoff Reason = "Backoff"

// Reasons of status ready.
const (
	// ReasonAvailable is a resource at its generation that serves.
	ReasonAvailable Reason = "Available"
	// ReasonRecovered is a resource whose failing health check passes again.
	ReasonRecovered Reason = "Recovered"
	// ReasonResizeWaitingForCapacity is a ready resource whose new args need more room than
	// its broker has free: it keeps serving at its observed generation, and the resize
	// is retried like a wait for capacity (Resource.WaitingSince says since when).
	ReasonResizeWaitingForCapacity Reason = "ResizeWaitingForCapacity"
)

// ReasonHealthCheckFailed is the reason of status unhealthy: the resource's health check
// fails (since Resource.UnhealthySince).
const ReasonHealthCheckFailed Reason = "HealthCheckFailed"

// Reasons of status error.
const (
	// ReasonBrokerError is a failure the broker says retrying cannot mend (invalid args,
	// an environ that cannot hibernate): nothing is retried until the args change or a
	// retry is asked for.
	ReasonBrokerError Reason = "BrokerError"
	// ReasonUnreadableRow is a row whose args, state or config the agent cannot read; it is
	// looked at again with backoff until someone fixes it.
	ReasonUnreadableRow Reason = "UnreadableRow"
	// ReasonUnknownType is a row whose type no environ of the agent serves.
	ReasonUnknownType Reason = "UnknownType"
	// ReasonNeverFits is a request larger than anything its provisioner has (NeverFitsError):
	// no room that frees can ever hold it. It waits for new args, a retry asked for, or a
	// change of the provisioner's spec, which moves its resources to a new generation.
	ReasonNeverFits Reason = "NeverFits"
)

// ReasonDeleteRequested is the reason of status deleting until a deprovision attempt fails
// (then Backoff): a delete asked for. An attempt writes no status before it deprovisions,
// so that a delete adds no event to the history but its request and the row's removal.
const ReasonDeleteRequested Reason = "DeleteRequested"

// ReasonHibernating is an attempt stopping the resource while keeping its data (status
// hibernating; Backoff too).
const ReasonHibernating Reason = "Hibernating"

// ReasonHibernated is the reason of status hibernated: stopped, data kept.
const ReasonHibernated Reason = "Hibernated"

// ReasonsByStatus is the closed list of reasons each status may carry.
var ReasonsByStatus = map[Status][]Reason{
	StatusPending:      {ReasonCreated, ReasonWaitingForCapacity, ReasonQuotaExceeded, ReasonBrokerUnavailable},
	StatusProvisioning: {ReasonProvisioning, ReasonAwaitingReady, ReasonBackoff, ReasonBrokerUnavailable},
	StatusReady:        {ReasonAvailable, ReasonRecovered, ReasonResizeWaitingForCapacity, ReasonQuotaExceeded, ReasonBrokerUnavailable},
	StatusUnhealthy:    {ReasonHealthCheckFailed},
	StatusError:        {ReasonBrokerError, ReasonUnreadableRow, ReasonUnknownType, ReasonNeverFits},
	StatusDeleting:     {ReasonDeleteRequested, ReasonBackoff, ReasonBrokerUnavailable},
	StatusHibernating:  {ReasonHibernating, ReasonBackoff, ReasonBrokerUnavailable},
	StatusHibernated:   {ReasonHibernated},
}

// WaitingReasons are the reasons of a resource that waits for something outside it (room,
// its owner's quota, its broker): while a resource keeps one, the store keeps the time the
// wait began (StateTimes.WaitingSince).
var WaitingReasons = []Reason{ReasonWaitingForCapacity, ReasonResizeWaitingForCapacity, ReasonQuotaExceeded, ReasonBrokerUnavailable}

// Waits reports whether reason is one of WaitingReasons.
func (reason Reason) Waits() bool {
	for _, waiting := range WaitingReasons {
		if reason == waiting {
			return true
		}
	}
	return false
}

// ValidFor reports whether reason is one of status's reasons.
func (reason Reason) ValidFor(status Status) bool {
	for _, known := range ReasonsByStatus[status] {
		if reason == known {
			return true
		}
	}
	return false
}

// StateTimes are the times the state machine keeps beside the status, so that no code has
// to recover them from a message.
type StateTimes struct {
	// WaitingSince is when the resource began waiting; nil unless its reason is one of
	// WaitingReasons. The store keeps the first value while the reason stays.
	WaitingSince *time.Time
	// LastAttemptAt is when the agent last recorded the outcome of an attempt (database
	// clock); nil before the first.
	LastAttemptAt *time.Time
}
