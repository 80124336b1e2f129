package provisioner

import (
	"errors"
	"fmt"
	"time"

	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

type retryPolicySuite struct{}

var _ = gc.Suite(&retryPolicySuite{})

// Every row of the policy, from the attempt's failure as classify sees it to what the
// record of the failure says.
func (*retryPolicySuite) TestDecide(c *gc.C) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	policy := func(rand float64) retryPolicy {
		return retryPolicy{base: 10 * time.Second, max: 5 * time.Minute, capacityRetry: time.Minute, rand: func() float64 { return rand }}
	}
	const waitingMessage = "waiting for capacity: reconcile: no host has 1 free slot: no capacity"
	full := fmt.Errorf("reconcile: no host has 1 free slot: %w", domain.ErrNoCapacity)
	unknownType := &environ.UnknownTypeError{Type: "gizmo", Served: []domain.ResourceType{domain.ResourceTypeRuntime}}
	neverFits := &domain.NeverFitsError{Provisioner: "pool", Slots: 5, Largest: 4,
		Limit: "its largest host has 4", Raise: "raise a host's slots in the provisioner set"}
	const resizeMessage = "serving generation 2 while generation 3 waits for capacity: reconcile: no host has 1 free slot: no capacity"
	for _, t := range []struct {
		about       string
		row         domain.Resource // the row as the attempt last read or wrote it
		hibernating bool
		serving     bool // the row served when the attempt began
		err         error
		rand        float64
		want        retryDecision
	}{{
		about: "a transient failure is retried with backoff, provisioning",
		row:   domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning},
		err:   errors.New("reconcile: host busy"), rand: 0.8,
		want: retryDecision{status: domain.StatusProvisioning, reason: domain.ReasonBackoff, attempts: 1, retryIn: 8 * time.Second,
			outcome: OutcomeRetry, message: "attempt 1 failed: reconcile: host busy; retrying at 2025-03-01T12:00:08Z"},
	}, {
		about: "the backoff grows with the attempts, up to its ceiling",
		row:   domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, Attempts: 2},
		err:   errors.New("boom"), rand: 0.5,
		want: retryDecision{status: domain.StatusProvisioning, reason: domain.ReasonBackoff, attempts: 3, retryIn: 20 * time.Second,
			outcome: OutcomeRetry, message: "attempt 3 failed: boom; retrying at 2025-03-01T12:00:20Z"},
	}, {
		about: "the backoff never exceeds its maximum",
		row:   domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonBackoff, Attempts: 40},
		err:   errors.New("boom"), rand: 0.999,
		want: retryDecision{status: domain.StatusProvisioning, reason: domain.ReasonBackoff, attempts: 41, retryIn: 299700 * time.Millisecond,
			outcome: OutcomeRetry, message: "attempt 41 failed: boom; retrying at 2025-03-01T12:04:59Z"},
	}, {
		about: "nor falls under half its base",
		row:   domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning},
		err:   errors.New("boom"), rand: 0,
		want: retryDecision{status: domain.StatusProvisioning, reason: domain.ReasonBackoff, attempts: 1, retryIn: 5 * time.Second,
			outcome: OutcomeRetry, message: "attempt 1 failed: boom; retrying at 2025-03-01T12:00:05Z"},
	}, {
		about: "a deprovision is retried whatever the error, a permanent one too",
		row:   domain.Resource{Status: domain.StatusDeleting, Reason: domain.ReasonDeleteRequested},
		err:   environ.Permanent(errors.New("deprovision: host gone")), rand: 0.5,
		want: retryDecision{status: domain.StatusDeleting, reason: domain.ReasonBackoff, attempts: 1, retryIn: 5 * time.Second,
			outcome: OutcomeRetry, message: "deprovision attempt 1 failed: deprovision: host gone; retrying at 2025-03-01T12:00:05Z"},
	}, {
		about: "a deprovision waits for no capacity",
		row:   domain.Resource{Status: domain.StatusDeleting, Reason: domain.ReasonBackoff, Attempts: 1},
		err:   full, rand: 0.5,
		want: retryDecision{status: domain.StatusDeleting, reason: domain.ReasonBackoff, attempts: 2, retryIn: 10 * time.Second,
			outcome: OutcomeRetry, message: "deprovision attempt 2 failed: " + full.Error() + "; retrying at 2025-03-01T12:00:10Z"},
	}, {
		about:       "a hibernate stays hibernating and is retried whatever the error",
		row:         domain.Resource{Status: domain.StatusHibernating, Reason: domain.ReasonHibernating},
		hibernating: true,
		err:         environ.Permanent(errors.New("hibernate: api unreachable")), rand: 0.5,
		want: retryDecision{status: domain.StatusHibernating, reason: domain.ReasonBackoff, attempts: 1, retryIn: 5 * time.Second,
			outcome: OutcomeRetry, message: "hibernate attempt 1 failed: hibernate: api unreachable; retrying at 2025-03-01T12:00:05Z"},
	}, {
		about: "an unreadable row is an error looked at again with backoff",
		row:   domain.Resource{Status: domain.StatusPending, Reason: domain.ReasonCreated},
		err:   &unreadableError{"config is not JSON Berth can read: number 1e+400 out of range"}, rand: 0.8,
		want: retryDecision{status: domain.StatusError, reason: domain.ReasonUnreadableRow, attempts: 1, retryIn: 8 * time.Second,
			outcome: OutcomeRetry, message: "config is not JSON Berth can read: number 1e+400 out of range: " +
				"fix the column with SQL or delete the resource; looking again at 2025-03-01T12:00:08Z"},
	}, {
		about: "a type no environ serves fails for good, naming the served types",
		row:   domain.Resource{Status: domain.StatusPending, Reason: domain.ReasonCreated},
		err:   unknownType, rand: 0.5,
		want: retryDecision{status: domain.StatusError, reason: domain.ReasonUnknownType, attempts: 1, outcome: OutcomePermanent,
			message: unknownType.Error()},
	}, {
		about: "a type the provisioner does not serve fails for good",
		row:   domain.Resource{Status: domain.StatusPending, Reason: domain.ReasonCreated},
		err:   environ.Permanent(errors.New(`provisioner "pool" (static) does not provision resources of type "clickhouse": choose a provisioner that does`)), rand: 0.5,
		want: retryDecision{status: domain.StatusError, reason: domain.ReasonBrokerError, attempts: 1, outcome: OutcomePermanent,
			message: `provisioner "pool" (static) does not provision resources of type "clickhouse": choose a provisioner that does`},
	}, {
		about: "a permanent broker error fails for good",
		row:   domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning},
		err:   fmt.Errorf("reconcile: %w", environ.Permanent(errors.New("quota exceeded"))), rand: 0.5,
		want: retryDecision{status: domain.StatusError, reason: domain.ReasonBrokerError, attempts: 1, outcome: OutcomePermanent,
			message: "reconcile: quota exceeded"},
	}, {
		about: "invalid args fail for good",
		row:   domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning},
		err:   fmt.Errorf("reconcile: %w", &domain.FieldError{Field: "args.slots", Msg: "must be at least 1, got 0"}), rand: 0.5,
		want: retryDecision{status: domain.StatusError, reason: domain.ReasonBrokerError, attempts: 1, outcome: OutcomePermanent,
			message: "reconcile: args.slots: must be at least 1, got 0"},
	}, {
		about: "an environ that cannot hibernate fails for good, before asking it to",
		row:   domain.Resource{Status: domain.StatusReady, Reason: domain.ReasonAvailable},
		err:   environ.Permanent(cannotHibernate("pool", "fake", "r1")), rand: 0.5,
		want: retryDecision{status: domain.StatusError, reason: domain.ReasonBrokerError, attempts: 1, outcome: OutcomePermanent,
			message: `provisioner "pool" (fake) cannot hibernate resources: wake the resource (berth resource wake r1) or delete it`},
	}, {
		about: "a request larger than anything the provisioner has fails for good, in its own words",
		row:   domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning},
		err:   fmt.Errorf("reconcile: place runtime: %w", neverFits), rand: 0.5,
		want: retryDecision{status: domain.StatusError, reason: domain.ReasonNeverFits, attempts: 1, outcome: OutcomePermanent,
			message: `args.slots: 5 slots can never fit provisioner "pool": its largest host has 4 (raise a host's slots in the provisioner set, or ask for at most 4)`},
	}, {
		about: "never fits wins over the broker marking it permanent",
		row:   domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning},
		err:   fmt.Errorf("reconcile: %w", environ.Permanent(neverFits)), rand: 0.5,
		want: retryDecision{status: domain.StatusError, reason: domain.ReasonNeverFits, attempts: 1, outcome: OutcomePermanent,
			message: neverFits.Error()},
	}, {
		about:   "a resize that never fits fails for good, serving or not",
		row:     domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, Generation: 3, ObservedGeneration: 2},
		serving: true,
		err:     neverFits, rand: 0.5,
		want: retryDecision{status: domain.StatusError, reason: domain.ReasonNeverFits, attempts: 1, outcome: OutcomePermanent,
			message: neverFits.Error()},
	}, {
		about:   "a resize with no room keeps a serving resource ready, waiting",
		row:     domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, Generation: 3, ObservedGeneration: 2},
		serving: true,
		err:     full, rand: 0.5,
		want: retryDecision{status: domain.StatusReady, reason: domain.ReasonResizeWaitingForCapacity, attempts: 1, retryIn: 5 * time.Second,
			outcome: OutcomeCapacity, message: resizeMessage},
	}, {
		about: "a resize still waiting, for the same reason, is retried at least every CapacityRetry",
		row: domain.Resource{Status: domain.StatusReady, Reason: domain.ReasonResizeWaitingForCapacity, Attempts: 5,
			StatusMessage: resizeMessage, Generation: 3, ObservedGeneration: 2},
		serving: true,
		err:     full, rand: 0.5,
		want: retryDecision{status: domain.StatusReady, reason: domain.ReasonResizeWaitingForCapacity, attempts: 6, retryIn: time.Minute,
			outcome: OutcomeCapacity, message: resizeMessage, stillWaiting: true},
	}, {
		about: "no capacity starts a wait, pending",
		row:   domain.Resource{Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning},
		err:   full, rand: 0.5,
		want: retryDecision{status: domain.StatusPending, reason: domain.ReasonWaitingForCapacity, attempts: 1, retryIn: 5 * time.Second,
			outcome: OutcomeCapacity, message: waitingMessage},
	}, {
		about: "a wait for capacity is retried at least every CapacityRetry",
		row:   domain.Resource{Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity, Attempts: 5, StatusMessage: waitingMessage},
		err:   full, rand: 0.5,
		want: retryDecision{status: domain.StatusPending, reason: domain.ReasonWaitingForCapacity, attempts: 6, retryIn: time.Minute,
			outcome: OutcomeCapacity, message: waitingMessage, stillWaiting: true},
	}, {
		about: "still waiting, for the same reason",
		row:   domain.Resource{Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity, Attempts: 1, StatusMessage: waitingMessage},
		err:   full, rand: 0.5,
		want: retryDecision{status: domain.StatusPending, reason: domain.ReasonWaitingForCapacity, attempts: 2, retryIn: 10 * time.Second,
			outcome: OutcomeCapacity, message: waitingMessage, stillWaiting: true},
	}, {
		about: "waiting for another reason of the broker's is news",
		row:   domain.Resource{Status: domain.StatusPending, Reason: domain.ReasonWaitingForCapacity, Attempts: 1, StatusMessage: waitingMessage},
		err:   fmt.Errorf("reconcile: no host is up: %w", domain.ErrNoCapacity), rand: 0.5,
		want: retryDecision{status: domain.StatusPending, reason: domain.ReasonWaitingForCapacity, attempts: 2, retryIn: 10 * time.Second,
			outcome: OutcomeCapacity, message: "waiting for capacity: reconcile: no host is up: no capacity"},
	}, {
		about: "a row with the same message but another reason is not waiting yet",
		row:   domain.Resource{Status: domain.StatusPending, Reason: domain.ReasonCreated, StatusMessage: waitingMessage},
		err:   full, rand: 0.5,
		want: retryDecision{status: domain.StatusPending, reason: domain.ReasonWaitingForCapacity, attempts: 1, retryIn: 5 * time.Second,
			outcome: OutcomeCapacity, message: waitingMessage},
	}} {
		a := &attempt{r: t.row, hibernating: t.hibernating, serving: t.serving}
		got := policy(t.rand).decide(a.classify(t.err), now)
		c.Check(got, gc.DeepEquals, t.want, gc.Commentf("%s", t.about))
		c.Check(got.reason.ValidFor(got.status), gc.Equals, true, gc.Commentf("%s: reason %s of %s", t.about, got.reason, got.status))
	}
}

// The retry delay of every row that retries stays within the policy's bounds, whatever the
// draw and the attempts: at least half the base, under the maximum, and under CapacityRetry
// for a wait for capacity. A permanent failure draws nothing and schedules nothing.
func (*retryPolicySuite) TestDelayBounds(c *gc.C) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	const base, maxDelay, capacityRetry = time.Second, time.Hour, 10 * time.Minute
	for _, kind := range []failureKind{failedTransient, failedDeprovision, failedHibernate, failedUnreadable, failedNoCapacity, failedResizeNoCapacity} {
		for attempts := 0; attempts < 70; attempts++ {
			for _, r := range []float64{0, 0.3, 0.999} {
				p := retryPolicy{base: base, max: maxDelay, capacityRetry: capacityRetry, rand: func() float64 { return r }}
				d := p.decide(failure{kind: kind, err: errors.New("boom"), attempts: attempts}, now)
				ceiling := maxDelay
				if kind == failedNoCapacity || kind == failedResizeNoCapacity {
					ceiling = capacityRetry
				}
				comment := gc.Commentf("kind %d, attempts %d, rand %v: %s", kind, attempts, r, d.retryIn)
				c.Check(d.retryIn >= base/2 && d.retryIn <= ceiling, gc.Equals, true, comment)
				c.Check(d.outcome, gc.Not(gc.Equals), OutcomePermanent, comment)
			}
		}
	}
	for _, kind := range []failureKind{failedPermanent, failedUnknownType, failedNeverFits} {
		p := retryPolicy{base: base, max: maxDelay, capacityRetry: capacityRetry, rand: func() float64 {
			c.Errorf("kind %d drew a backoff", kind)
			return 0
		}}
		d := p.decide(failure{kind: kind, err: &domain.NeverFitsError{Provisioner: "pool", Slots: 2, Largest: 1}}, now)
		c.Check(d.retryIn, gc.Equals, time.Duration(0))
		c.Check(d.outcome, gc.Equals, OutcomePermanent)
	}
}
