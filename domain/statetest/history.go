package statetest

import (
	_ "embed"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// historyGolden is the history testHistoryIsKeptEventForEvent's scenario wrote before a
// resource could be provisioned in one transaction (domain.InstantProvision), when every
// step of its provisioning was a write of its own: one "kind status message" line per
// event, in order.
//
//go:embed testdata/history.golden
var historyGolden string

// One resource's whole life, through the calls the agent, the health checker and the CLI
// make (created, provisioned to ready, checked unhealthy and recovered, resized, hibernated
// and woken, failed and retried, paused, relabelled, refused a fenced write, deleted), has
// the same history event for event as it had when the table's triggers wrote every event:
// the same kinds, statuses and messages, in the same order, with times that never go back.
func testHistoryIsKeptEventForEvent(t *testing.T, b *Backend) {
	testHistoryScenario(t, b, false)
}

// The same life, provisioned first in one transaction (domain.InstantProvision), has the
// same history event for event too.
func testHistoryIsKeptProvisionedInOneTransaction(t *testing.T, b *Backend) {
	testHistoryScenario(t, b, true)
}

func testHistoryScenario(t *testing.T, b *Backend, instant bool) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("history"))
	claim := func(start bool) domain.Lease {
		t.Helper()
		var c domain.Claim
		var err error
		if start {
			c, err = b.ClaimAndStart(ctx, r.ID, "agent", ttl, domain.ProvisioningStart{Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}})
		} else {
			c, err = b.ClaimResource(ctx, r.ID, "agent", ttl)
		}
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		r = c.Resource
		return c.Lease
	}
	record := func(lease domain.Lease, u domain.ProgressUpdate) {
		t.Helper()
		r = recordAs(t, b, r, lease, u)
	}
	control := func(what string, f func() (domain.Resource, error)) {
		t.Helper()
		got, err := f()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		r = got
	}
	observed := func() *int64 { g := r.Generation; return &g }
	ready := func(lease domain.Lease, message string, passed *domain.StatusStep) {
		t.Helper()
		record(lease, domain.ProgressUpdate{Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: message,
			State: map[string]any{"host": "h1"}, ObservedGeneration: observed(), ReleaseLease: true, Passed: passed})
	}

	// Provisioned to ready: the start in the claim, the wait passed in the ready record; or
	// all three in the reservation's transaction.
	if instant {
		req, pick := InstantProvision(r, &r)
		if _, err := b.ReserveSlots(ctx, req, pick); err != nil {
			t.Fatalf("instant provision: %v", err)
		}
	} else {
		lease := claim(true)
		ready(lease, "ready at generation 1", &domain.StatusStep{Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady,
			Message: "provisioning generation 1: waiting for it to serve"})
	}

	// Checked unhealthy with a repair, then recovered.
	control("record unhealthy", func() (domain.Resource, error) {
		return b.RecordHealth(ctx, r.ID, r.CheckedBy("checker"), domain.HealthUpdate{Status: domain.StatusUnhealthy,
			Reason: domain.ReasonHealthCheckFailed, StatusMessage: "health check failing: 503", UnhealthySince: time.Now(),
			Repairs: []string{"slot reservation was missing; reserved again on h1"}})
	})
	control("record recovered", func() (domain.Resource, error) {
		return b.RecordHealth(ctx, r.ID, r.CheckedBy("checker"), domain.HealthUpdate{Status: domain.StatusReady,
			Reason: domain.ReasonRecovered, StatusMessage: "health check passing again"})
	})

	// Resized: new args, a step of provisioning, a renewal that changes nothing, ready.
	control("update args", func() (domain.Resource, error) {
		return b.UpdateResourceArgs(ctx, r.ID, map[string]any{"slots": 2})
	})
	lease := claim(true) // not untouched: only claimed
	resizing := domain.ProgressUpdate{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "resizing to generation 2"}
	record(lease, resizing)
	record(lease, resizing)
	ready(lease, "ready at generation 2", nil)

	// Hibernated and woken.
	control("hibernate", func() (domain.Resource, error) { return b.SetHibernate(ctx, r.ID, true) })
	lease = claim(false)
	record(lease, domain.ProgressUpdate{Status: domain.StatusHibernating, Reason: domain.ReasonHibernating, StatusMessage: "hibernating"})
	record(lease, domain.ProgressUpdate{Status: domain.StatusHibernated, Reason: domain.ReasonHibernated, StatusMessage: "hibernated", ReleaseLease: true})
	control("wake", func() (domain.Resource, error) { return b.SetHibernate(ctx, r.ID, false) })
	lease = claim(false)
	ready(lease, "ready at generation 2", &domain.StatusStep{Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady,
		Message: "waking: waiting for it to serve"})

	// Failed, retried with backoff, failed for good, retried by the client, ready again.
	lease = claim(false)
	record(lease, domain.ProgressUpdate{Status: domain.StatusProvisioning, Reason: domain.ReasonBackoff,
		StatusMessage: "attempt 1 failed: broker said no", Attempts: 1, RetryIn: time.Hour, LastError: "broker said no", ReleaseLease: true})
	lease = claim(false)
	record(lease, domain.ProgressUpdate{Status: domain.StatusProvisioning, Reason: domain.ReasonBackoff,
		StatusMessage: "attempt 2 failed: broker said no", Attempts: 2, RetryIn: time.Hour, LastError: "broker said no", ReleaseLease: true})
	lease = claim(false)
	record(lease, domain.ProgressUpdate{Status: domain.StatusError, Reason: domain.ReasonBrokerError,
		StatusMessage: "broker said no", Attempts: 3, LastError: "broker said no", ReleaseLease: true})
	control("retry", func() (domain.Resource, error) { return b.RequestRetry(ctx, r.ID) })
	lease = claim(false)
	ready(lease, "ready at generation 2", nil)

	// Paused and resumed, relabelled (a new generation), provisioned to it.
	control("pause", func() (domain.Resource, error) { return b.SetPaused(ctx, r.ID, true) })
	control("resume", func() (domain.Resource, error) { return b.SetPaused(ctx, r.ID, false) })
	control("labels", func() (domain.Resource, error) {
		return b.SetLabels(ctx, r.ID, map[string]string{"team": "web", "env": "prod"})
	})
	lease = claim(false)
	fenced := lease
	lease = claim(false) // a second claim fences the first's writes
	if _, err := b.RecordProgress(ctx, r.ID, fenced, domain.ProgressUpdate{Generation: r.Generation, Status: domain.StatusReady,
		Reason: domain.ReasonAvailable, StatusMessage: "fenced", Passed: &domain.StatusStep{Status: domain.StatusProvisioning, Reason: domain.ReasonAwaitingReady, Message: "fenced step"}}); !errors.Is(err, domain.ErrLeaseHeld) {
		t.Fatalf("record under a fenced lease: %v, want ErrLeaseHeld", err)
	}
	ready(lease, "ready at generation 3", nil)

	// Deleted: requested, deprovisioned, removed.
	control("delete", func() (domain.Resource, error) { return b.RequestDelete(ctx, r.ID) })
	lease = claim(false)
	record(lease, domain.ProgressUpdate{Status: domain.StatusDeleting, Reason: domain.ReasonDeleteRequested, StatusMessage: "deprovisioning"})
	if err := b.FinalizeDelete(ctx, r.ID, lease); err != nil {
		t.Fatalf("finalize delete: %v", err)
	}

	es := events(t, b, r.ID, 0)
	want := strings.Split(strings.TrimSpace(historyGolden), "\n")
	if got := describe(es); !slices.Equal(got, want) {
		t.Fatalf("history =\n%s\nwant (testdata/history.golden)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq || es[i].At.Before(es[i-1].At) {
			t.Errorf("event %d out of order: %+v after %+v", i, es[i], es[i-1])
		}
	}
}
