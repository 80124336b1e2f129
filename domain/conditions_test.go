package domain_test

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

func TestConditions(t *testing.T) {
	changed := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	// row is a resource at generation 2, brought to ready at generation 2.
	row := func(change func(*domain.Resource)) domain.Resource {
		r := domain.Resource{ID: "r1", Status: domain.StatusReady, StatusMessage: "ready at generation 2",
			Generation: 2, ObservedGeneration: 2, StatusChangedAt: changed}
		change(&r)
		return r
	}
	type cond struct {
		status          domain.ConditionStatus
		reason, message string
	}
	const T, F = domain.ConditionTrue, domain.ConditionFalse
	tests := []struct {
		name          string
		r             domain.Resource
		ready, synced cond
	}{
		{"ready", row(func(*domain.Resource) {}),
			cond{T, "Ready", "ready at generation 2"}, cond{T, "ReconcileSuccess", ""}},
		{"new", row(func(r *domain.Resource) {
			r.Status, r.StatusMessage, r.Generation, r.ObservedGeneration = domain.StatusPending, "", 1, 0
		}),
			cond{F, "Pending", ""}, cond{F, "ReconcilePending", "waiting for the agent to bring it to generation 1 (observed 0)"}},
		{"create over quota", row(func(r *domain.Resource) {
			r.Status, r.StatusMessage, r.ObservedGeneration = domain.StatusPending, "waiting for quota: owner \"acme\" holds 5 of 5 resources", 1
			r.Reason = domain.ReasonQuotaExceeded
		}),
			cond{F, "QuotaExceeded", "waiting for quota: owner \"acme\" holds 5 of 5 resources"},
			cond{F, "ReconcilePending", "waiting for the agent to bring it to generation 2 (observed 1)"}},
		{"resize over quota", row(func(r *domain.Resource) {
			r.StatusMessage, r.ObservedGeneration, r.Reason = "waiting for quota: 12 of 16 slots", 1, domain.ReasonQuotaExceeded
		}),
			cond{T, "Ready", "waiting for quota: 12 of 16 slots"}, cond{F, "QuotaExceeded", "waiting for quota: 12 of 16 slots"}},
		{"broker unavailable", row(func(r *domain.Resource) {
			r.Status, r.StatusMessage, r.ObservedGeneration = domain.StatusProvisioning, "broker unavailable: 503", 1
			r.Reason = domain.ReasonBrokerUnavailable
		}),
			cond{F, "Provisioning", "broker unavailable: 503"}, cond{F, "BrokerUnavailable", "broker unavailable: 503"}},
		{"waiting for capacity", row(func(r *domain.Resource) {
			r.Status, r.StatusMessage, r.ObservedGeneration = domain.StatusPending, "waiting for capacity since 2026-12-01T09:00:00Z: no host has 4 free slots", 1
			r.Reason = domain.ReasonWaitingForCapacity
		}),
			cond{F, "WaitingForCapacity", "waiting for capacity since 2026-12-01T09:00:00Z: no host has 4 free slots"},
			cond{F, "ReconcilePending", "waiting for the agent to bring it to generation 2 (observed 1)"}},
		{"a resize waiting for capacity serves at the old size", row(func(r *domain.Resource) {
			r.Generation, r.LastError = 3, "reconcile: place runtime: host h1 has 1 free slot; resize from 2 to 4 slots needs 2: no capacity"
			r.Reason = domain.ReasonResizeWaitingForCapacity
			r.StatusMessage = "serving generation 2 while generation 3 waits for capacity: " + r.LastError
		}),
			cond{T, "Ready", "serving generation 2 while generation 3 waits for capacity: reconcile: place runtime: host h1 has 1 free slot; resize from 2 to 4 slots needs 2: no capacity"},
			cond{F, "ResizeWaitingForCapacity", "serving generation 2 while generation 3 waits for capacity: reconcile: place runtime: host h1 has 1 free slot; resize from 2 to 4 slots needs 2: no capacity"}},
		{"args changed", row(func(r *domain.Resource) {
			r.Status, r.StatusMessage, r.Generation = domain.StatusProvisioning, "provisioning generation 3", 3
		}),
			cond{F, "Provisioning", "provisioning generation 3"}, cond{F, "ReconcilePending", "waiting for the agent to bring it to generation 3 (observed 2)"}},
		{"backing off", row(func(r *domain.Resource) {
			r.Status, r.StatusMessage, r.Generation, r.LastError = domain.StatusProvisioning, "attempt 2 failed: host down; retrying at T", 3, "host down"
		}),
			cond{F, "Provisioning", "attempt 2 failed: host down; retrying at T"}, cond{F, "ReconcileError", "host down"}},
		{"permanent failure", row(func(r *domain.Resource) {
			r.Status, r.StatusMessage, r.LastError = domain.StatusError, "unknown provisioner \"gone\"", "unknown provisioner \"gone\""
		}),
			cond{F, "Error", "unknown provisioner \"gone\""}, cond{F, "ReconcileError", "unknown provisioner \"gone\""}},
		{"unhealthy", row(func(r *domain.Resource) {
			r.Status, r.StatusMessage = domain.StatusUnhealthy, "health check failing: 503"
		}),
			cond{F, "Unhealthy", "health check failing: 503"}, cond{T, "ReconcileSuccess", ""}},
		{"deleting", row(func(r *domain.Resource) { r.Status, r.StatusMessage = domain.StatusDeleting, "delete requested" }),
			cond{F, "Deleting", "delete requested"}, cond{T, "ReconcileSuccess", ""}},
		{"paused beats an error", row(func(r *domain.Resource) { r.Paused, r.Status, r.LastError = true, domain.StatusError, "boom" }),
			cond{F, "Error", "ready at generation 2"}, cond{F, "Paused", "paused: the agent leaves the resource alone until it is resumed"}},
		{"paused while ready", row(func(r *domain.Resource) { r.Paused = true }),
			cond{T, "Ready", "ready at generation 2"}, cond{F, "Paused", "paused: the agent leaves the resource alone until it is resumed"}},
		{"hibernate requested", row(func(r *domain.Resource) { r.Hibernate = true }),
			cond{T, "Ready", "ready at generation 2"}, cond{F, "ReconcilePending", "waiting for the agent to hibernate it"}},
		{"hibernating", row(func(r *domain.Resource) {
			r.Hibernate, r.Status, r.StatusMessage = true, domain.StatusHibernating, "hibernating"
		}),
			cond{F, "Hibernating", "hibernating"}, cond{F, "ReconcilePending", "waiting for the agent to hibernate it"}},
		{"hibernate attempt failed", row(func(r *domain.Resource) {
			r.Hibernate, r.Status, r.StatusMessage, r.LastError = true, domain.StatusHibernating, "hibernate attempt 1 failed: x; retrying at T", "x"
		}),
			cond{F, "Hibernating", "hibernate attempt 1 failed: x; retrying at T"}, cond{F, "ReconcileError", "x"}},
		{"hibernated", row(func(r *domain.Resource) {
			r.Hibernate, r.Status, r.StatusMessage = true, domain.StatusHibernated, "hibernated"
		}),
			cond{F, "Hibernated", "hibernated"}, cond{T, "ReconcileSuccess", ""}},
		{"hibernated with args changed meanwhile", row(func(r *domain.Resource) {
			r.Hibernate, r.Status, r.StatusMessage, r.Generation = true, domain.StatusHibernated, "hibernated", 3
		}),
			cond{F, "Hibernated", "hibernated"}, cond{T, "ReconcileSuccess", ""}},
		{"wake requested", row(func(r *domain.Resource) { r.Status, r.StatusMessage = domain.StatusHibernated, "hibernated" }),
			cond{F, "Hibernated", "hibernated"}, cond{F, "ReconcilePending", "waiting for the agent to wake it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := domain.Conditions(tt.r)
			if len(got) != 2 || got[0].Type != domain.ConditionReady || got[1].Type != domain.ConditionSynced {
				t.Fatalf("conditions = %+v, want Ready then Synced", got)
			}
			for i, want := range []cond{tt.ready, tt.synced} {
				c := got[i]
				if (cond{c.Status, c.Reason, c.Message}) != want {
					t.Errorf("%s = %s %s %q, want %s %s %q", c.Type, c.Status, c.Reason, c.Message, want.status, want.reason, want.message)
				}
				if !c.LastTransitionTime.Equal(changed) || c.ObservedGeneration != tt.r.ObservedGeneration {
					t.Errorf("%s: last transition %v, observed generation %d; want %v and %d",
						c.Type, c.LastTransitionTime, c.ObservedGeneration, changed, tt.r.ObservedGeneration)
				}
			}
		})
	}
}
