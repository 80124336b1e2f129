package provisioner_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/worker/provisioner"
)

const lostToAgent2 = "lease lost to agent-2; this attempt's writes stop"

// An attempt whose lease another agent took over while it was inside Reconcile writes
// nothing more: its next record is refused, and it records no failure, releases nothing and
// does not wait for the resource to serve. It logs the loss once and looks again when the
// new holder's lease would end.
func (s *workerSuite) TestFencedAttemptStopsWriting(c *gc.C) {
	s.env.gateReconcile = true
	s.state.add(domain.Resource{ID: "r1"})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	c.Assert(s.env.entered.Next(c), gc.Equals, "reconcile:r1")
	lease := s.env.lastInput().Lease
	c.Assert(lease, gc.NotNil)
	c.Check(*lease, gc.Equals, domain.Lease{Holder: holder, Token: 1})

	s.state.fence("r1", "agent-2", leaseTTL)
	s.env.gate.Open(c)
	c.Check(s.metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeRetry})
	waitReport(c, w, "next-retry-at", "2025-03-01T12:10:00Z")

	c.Check(s.state.refusedCount("r1"), gc.Equals, 1)
	c.Check(s.state.progress("r1"), gc.HasLen, 0)
	c.Check(s.state.releaseCallCount("r1"), gc.Equals, 0)
	c.Check(s.env.callCount("await"), gc.Equals, 0)
	c.Check(strings.Count(s.logs.String(), lostToAgent2), gc.Equals, 1)
	c.Check(s.logs.String(), gc.Not(gc.Matches), `(?s).*reconcile failed.*`)
}

// A broker write the store refused for the lease (the static pool's slot release) ends a
// deprovision the same way: the row is not finalized and no failure is recorded.
func (s *workerSuite) TestDeprovisionRefusedForTheLeaseFinalizesNothing(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Status: domain.StatusDeleting, Provisioner: "pool", State: map[string]any{"host": "h"}})
	s.env.script("deprovision", fmt.Errorf("deprovision runtime: release slots: %w",
		&domain.LeaseHeldError{Holder: "agent-2", ExpiresAt: epoch.Add(leaseTTL)}))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	c.Check(s.metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeRetry})
	row, ok := s.state.get("r1")
	c.Assert(ok, gc.Equals, true)
	c.Check(row.Status, gc.Equals, domain.StatusDeleting)
	c.Check(s.state.progress("r1"), gc.HasLen, 0)
	c.Check(strings.Count(s.logs.String(), lostToAgent2), gc.Equals, 1)
	c.Check(s.env.lastInput().Lease, gc.DeepEquals, &domain.Lease{Holder: holder, Token: 1})
}

// A claim over a lease whose holder stopped is logged with the previous holder and how long
// the work waited, and counted; a claim of a free lease is neither.
func (s *workerSuite) TestTakeoverLoggedAndCounted(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	s.state.add(domain.Resource{ID: "r2"})
	s.state.setLease("r1", "agent-2", epoch.Add(-90*time.Second))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1", "r2")
	s.state.waitRow(c, "r1", "ready", ready(1))
	s.state.waitRow(c, "r2", "ready", ready(1))
	s.metrics.waitOutcomes(c, 2)
	c.Check(s.metrics.takeoverObservations(), gc.DeepEquals, []string{"pool"})
	c.Check(strings.Count(s.logs.String(), "took over resource from agent-2 after 1m30s"), gc.Equals, 1)
	c.Check(strings.Count(s.logs.String(), "took over resource"), gc.Equals, 1)
}
