package domain

import (
	"fmt"
	"strings"
	"time"
)

// ConditionType names a condition of a resource, as Kubernetes and Crossplane name theirs.
type ConditionType string

const (
	// ConditionReady says whether the resource is ready for its clients.
	ConditionReady ConditionType = "Ready"
	// ConditionSynced says whether the agent has brought the resource to what its row asks
	// for (its generation, and hibernated or running as asked).
	ConditionSynced ConditionType = "Synced"
)

// ConditionStatus is the value of a condition.
type ConditionStatus string

const (
	ConditionTrue  ConditionStatus = "True"
	ConditionFalse ConditionStatus = "False"
)

// Reasons of the Synced condition; the Ready condition's reason is its status in CamelCase
// (see Conditions).
const (
	ReasonPaused           = "Paused"
	ReasonReconcileError   = "ReconcileError"
	ReasonReconcileSuccess = "ReconcileSuccess"
	ReasonReconcilePending = "ReconcilePending"
)

// Condition is one aspect of a resource's state in the shape Kubernetes tools show:
// derived from the row, never stored.
type Condition struct {
	Type   ConditionType
	Status ConditionStatus
	// Reason is a CamelCase word a program can match on; Message says it for a person.
	Reason  string
	Message string
	// LastTransitionTime is when the resource's status last changed (Resource.StatusChangedAt).
	LastTransitionTime time.Time
	// ObservedGeneration is the generation last brought to ready.
	ObservedGeneration int64
}

// Conditions derives r's Ready and Synced conditions, in that order.
//
// Ready is True only in status ready; its reason is the status in CamelCase (Pending,
// WaitingForCapacity for a pending resource waiting for room, Provisioning, Ready,
// Unhealthy, Error, Deleting, Hibernating, Hibernated) and its message the status message.
//
// Synced is False with reason Paused for a paused resource, False ResizeWaitingForCapacity
// (message: the status message) for a resource that serves at its observed generation while
// its resize waits for room (Ready stays True: it serves, at its old size), False
// ReconcileError when an attempt failed (message: the last error), True ReconcileSuccess when the resource is what
// its row asks for (at its generation, or hibernated when asked to be), else False
// ReconcilePending.
func Conditions(r Resource) []Condition {
	ready := Condition{
		Type:               ConditionReady,
		Status:             ConditionFalse,
		Reason:             statusReason(r),
		Message:            r.StatusMessage,
		LastTransitionTime: r.StatusChangedAt,
		ObservedGeneration: r.ObservedGeneration,
	}
	if r.Status == StatusReady {
		ready.Status = ConditionTrue
	}
	synced := Condition{
		Type:               ConditionSynced,
		Status:             ConditionFalse,
		LastTransitionTime: r.StatusChangedAt,
		ObservedGeneration: r.ObservedGeneration,
	}
	hibernatedOrHibernating := r.Status == StatusHibernated || r.Status == StatusHibernating
	switch {
	case r.Paused:
		synced.Reason = ReasonPaused
		synced.Message = "paused: the agent leaves the resource alone until it is resumed"
	case r.Status == StatusReady && (r.Reason == ReasonResizeWaitingForCapacity || r.Reason == ReasonQuotaExceeded):
		synced.Reason, synced.Message = string(r.Reason), r.StatusMessage
	case r.Reason == ReasonBrokerUnavailable:
		synced.Reason, synced.Message = string(ReasonBrokerUnavailable), r.StatusMessage
	case r.LastError != "":
		synced.Reason, synced.Message = ReasonReconcileError, r.LastError
	case r.Hibernate && r.Status == StatusHibernated:
		synced.Status, synced.Reason = ConditionTrue, ReasonReconcileSuccess
	case r.Hibernate:
		synced.Reason, synced.Message = ReasonReconcilePending, "waiting for the agent to hibernate it"
	case hibernatedOrHibernating:
		synced.Reason, synced.Message = ReasonReconcilePending, "waiting for the agent to wake it"
	case r.ObservedGeneration == r.Generation:
		synced.Status, synced.Reason = ConditionTrue, ReasonReconcileSuccess
	default:
		synced.Reason = ReasonReconcilePending
		synced.Message = fmt.Sprintf("waiting for the agent to bring it to generation %d (observed %d)", r.Generation, r.ObservedGeneration)
	}
	return []Condition{ready, synced}
}

// statusReason is r's status in CamelCase, or the reason a pending resource waits for
// (WaitingForCapacity, QuotaExceeded, BrokerUnavailable).
func statusReason(r Resource) string {
	if r.Status == StatusPending && r.Reason.Waits() {
		return string(r.Reason)
	}
	s := string(r.Status)
	if s == "" {
		return "Unknown"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
