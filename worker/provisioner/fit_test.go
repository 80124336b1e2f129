package provisioner_test

import (
	"fmt"
	"time"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/provisioner"
)

// neverFits is the refusal of a pool whose largest host has 4 slots.
var neverFits = &domain.NeverFitsError{Provisioner: "pool", Slots: 5, Largest: 4,
	Limit: "its largest host has 4", Raise: "raise a host's slots in the provisioner set"}

// A request larger than anything the provisioner has fails for good, with reason NeverFits
// and the refusal's own message (not a wait for capacity); a new generation, as a change
// of the provisioner's spec makes, retries it.
func (s *workerSuite) TestNeverFitsFailsForGood(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Args: map[string]any{"slots": 5}})
	s.env.script("reconcile", fmt.Errorf("place runtime: %w", neverFits))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "error", func(r *domain.Resource) bool { return r.Status == domain.StatusError })
	s.state.waitIdle(c, "r1", 1)
	c.Check(row.Reason, gc.Equals, domain.ReasonNeverFits)
	c.Check(row.StatusMessage, gc.Equals, `args.slots: 5 slots can never fit provisioner "pool": its largest host has 4 `+
		`(raise a host's slots in the provisioner set, or ask for at most 4)`)
	c.Check(row.NextAttemptAt, gc.IsNil)
	c.Check(row.WaitingSince, gc.IsNil)
	c.Assert(s.clock.WaitAdvance(backoffMax, testkit.LongWait, 0), gc.IsNil)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 1)
	waitReport(c, w, "waiting-for-capacity", 0)

	// The provisioner's spec changed: its resources move to a new generation with their
	// failures cleared, as the args' change does.
	s.state.updateArgs("r1", map[string]any{"slots": 5})
	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready at generation 2", ready(2))
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomePermanent, provisioner.OutcomeReady})
}

// A resize with too little room free leaves a serving resource ready, at its observed
// generation, with reason ResizeWaitingForCapacity: its retries add nothing to its history
// (it never flips to provisioning and back), WaitingSince is kept for the whole wait, and
// room that frees on the provisioner brings the resize in at once.
func (s *workerSuite) TestResizeWithoutRoomKeepsServing(c *gc.C) {
	s.state.add(domain.Resource{ID: "old", Provisioner: "pool", Status: domain.StatusReady, ObservedGeneration: 1,
		State: map[string]any{"host": "a"}})
	s.state.add(domain.Resource{ID: "r1", Args: map[string]any{"slots": 1}})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)
	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
	s.state.waitIdle(c, "r1", 1)

	full := fmt.Errorf("host a has 1 free slot; resize from 1 to 3 slots needs 2: %w", domain.ErrNoCapacity)
	s.env.script("reconcile", full, full)
	s.state.updateArgs("r1", map[string]any{"slots": 3})
	s.watcher.send(c, "r1")
	const message = "serving generation 1 while generation 2 waits for capacity: " +
		"reconcile: host a has 1 free slot; resize from 1 to 3 slots needs 2: no capacity"
	for i, delay := range []time.Duration{5 * time.Second, 10 * time.Second} {
		row := s.state.waitRow(c, "r1", "resize waiting", func(r *domain.Resource) bool { return r.Attempts == i+1 })
		s.state.waitIdle(c, "r1", 2+i)
		c.Check(row.Status, gc.Equals, domain.StatusReady)
		c.Check(row.Reason, gc.Equals, domain.ReasonResizeWaitingForCapacity)
		c.Check(row.ObservedGeneration, gc.Equals, int64(1))
		c.Check(row.StatusMessage, gc.Equals, message)
		c.Check(row.WaitingSince, gc.DeepEquals, &epoch, gc.Commentf("attempt %d", i+1))
		due := s.clock.Now().Add(delay)
		c.Check(row.NextAttemptAt, gc.DeepEquals, &due)
		waitReport(c, w, "waiting-for-capacity", 1)
		if i == 0 {
			c.Assert(s.clock.WaitAdvance(delay, testkit.LongWait, 1), gc.IsNil)
		}
	}
	waiting, _ := s.state.get("r1")
	conditions := domain.Conditions(waiting)
	c.Check(conditions[0].Status, gc.Equals, domain.ConditionTrue)
	c.Check(conditions[1].Reason, gc.Equals, string(domain.ReasonResizeWaitingForCapacity))

	// Deleting another resource of the provisioner frees room: no clock advance needed.
	s.state.requestDelete("old")
	s.watcher.send(c, "old")
	s.state.waitGone(c, "old")
	row := s.state.waitRow(c, "r1", "ready at generation 2", ready(2))
	c.Check(row.Reason, gc.Equals, domain.ReasonAvailable)
	c.Check(row.WaitingSince, gc.IsNil)

	updates := s.state.progress("r1")[2:] // after generation 1's wait and ready (its claim recorded its start)
	c.Check(statuses(updates), gc.DeepEquals, []domain.Status{
		domain.StatusProvisioning, domain.StatusReady, domain.StatusReady, domain.StatusProvisioning, domain.StatusReady,
	})
	c.Check(reasons(updates), gc.DeepEquals, []domain.Reason{
		domain.ReasonProvisioning, domain.ReasonResizeWaitingForCapacity, domain.ReasonResizeWaitingForCapacity,
		domain.ReasonAwaitingReady, domain.ReasonAvailable,
	})
}

// An unhealthy runtime whose resize finds no room is not made ready: the health checker
// leaves out a resource whose generation is ahead of its observed one, so nothing would say
// it still fails. It waits in pending, as a new resource does.
func (s *workerSuite) TestUnhealthyResizeWithoutRoomWaitsPending(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Provisioner: "pool", Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed,
		Generation: 2, ObservedGeneration: 1, Args: map[string]any{"slots": 3}, State: map[string]any{"host": "a"}})
	s.env.script("reconcile", fmt.Errorf("no room: %w", domain.ErrNoCapacity))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "pending", func(r *domain.Resource) bool { return r.Attempts == 1 })
	c.Check(row.Status, gc.Equals, domain.StatusPending)
	c.Check(row.Reason, gc.Equals, domain.ReasonWaitingForCapacity)
	c.Check(row.ObservedGeneration, gc.Equals, int64(1))
}
