package provisioner_test

import (
	"errors"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/provisioner"
)

// readyRow is a resource provisioned at generation 1 by the pool.
func readyRow(id string) domain.Resource {
	return domain.Resource{
		ID: id, Name: "web", Owner: "acme", Provisioner: "pool", Status: domain.StatusReady, Reason: domain.ReasonAvailable,
		StatusMessage: "ready at generation 1", Generation: 1, ObservedGeneration: 1,
		Args: map[string]any{"slots": 1}, State: map[string]any{"host": "a"}, Config: map[string]any{"host": "host-" + id},
		Labels: map[string]string{"team": "data"},
	}
}

// A paused resource is claimed and left exactly as it is: not provisioned, not even
// deleted, and nothing is recorded; resuming it carries out what was asked meanwhile.
func (s *workerSuite) TestPausedResourceIsLeftAlone(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Paused: true})
	row := readyRow("r2")
	row.Paused, row.Status, row.StatusMessage = true, domain.StatusDeleting, "delete requested"
	s.state.add(row)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1", "r2")
	s.state.waitIdle(c, "r1", 1)
	s.state.waitIdle(c, "r2", 1)
	c.Check(s.state.progress("r1"), gc.HasLen, 0)
	c.Check(s.state.started("r1"), gc.HasLen, 0) // the claim did not start it either
	c.Check(s.state.progress("r2"), gc.HasLen, 0)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)
	c.Check(s.env.callCount("deprovision"), gc.Equals, 0)
	c.Check(s.logs.String(), gc.Matches, `(?s).*level=DEBUG msg="resource is paused; leaving it until it is resumed" id=r1.*`)

	s.state.setPaused("r1", false)
	s.state.setPaused("r2", false)
	s.watcher.send(c, "r1", "r2")
	s.state.waitRow(c, "r1", "ready", ready(1))
	s.state.waitGone(c, "r2")
}

// Args changed while paused are applied on resume.
func (s *workerSuite) TestArgsChangedWhilePausedAppliedOnResume(c *gc.C) {
	s.state.add(readyRow("r1"))
	s.state.setPaused("r1", true)
	s.state.updateArgs("r1", map[string]any{"slots": 2})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitIdle(c, "r1", 1)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)

	s.state.setPaused("r1", false)
	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready at generation 2", ready(2))
	c.Check(s.env.lastOpts().Args, gc.DeepEquals, map[string]any{"slots": 2})
}

// Hibernating records hibernating, asks the environ with the resource's labels, and records
// hibernated with the state the environ returned, keeping the config, in the write that
// gives up the lease.
func (s *workerSuite) TestHibernate(c *gc.C) {
	s.state.add(readyRow("r1"))
	s.state.setHibernate("r1", true)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "hibernated", func(r *domain.Resource) bool { return r.Status == domain.StatusHibernated })
	s.state.waitIdle(c, "r1", 1)
	c.Check(row.StatusMessage, gc.Equals, "hibernated at generation 1")
	c.Check(row.Reason, gc.Equals, domain.ReasonHibernated)
	c.Check(row.State, gc.DeepEquals, map[string]any{"hibernated": true, "generation": int64(1)})
	c.Check(row.Config, gc.DeepEquals, map[string]any{"host": "host-r1"})
	updates := s.state.progress("r1")
	c.Assert(updates, gc.HasLen, 2)
	c.Check(updates[0].Status, gc.Equals, domain.StatusHibernating)
	c.Check(updates[0].StatusMessage, gc.Equals, "hibernating generation 1")
	c.Check(reasons(updates), gc.DeepEquals, []domain.Reason{domain.ReasonHibernating, domain.ReasonHibernated})
	c.Check(updates[1].Config, gc.IsNil) // kept
	c.Check(updates[1].ReleaseLease, gc.Equals, true)
	c.Check(s.state.releaseCallCount("r1"), gc.Equals, 0)
	c.Check(s.env.callCount("hibernate"), gc.Equals, 1)
	c.Check(s.env.lastInput().State, gc.DeepEquals, map[string]any{"host": "a"})
	c.Check(s.env.lastOpts(), gc.DeepEquals, environ.ResourceOptions{
		Name: "web", Owner: "acme", Args: map[string]any{"slots": 1}, Generation: 1, Labels: map[string]string{"team": "data"},
	})
	c.Check(s.metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomeHibernated})

	// Hibernated is where it stays, a change of its args too, until it is woken.
	s.state.updateArgs("r1", map[string]any{"slots": 2})
	s.watcher.send(c, "r1")
	s.state.waitIdle(c, "r1", 2)
	c.Check(s.env.callCount("hibernate"), gc.Equals, 1)
	c.Check(s.env.callCount("reconcile"), gc.Equals, 0)
}

// Waking is provisioning from what Hibernate kept, with its own status message; args
// changed while hibernated are applied.
func (s *workerSuite) TestWake(c *gc.C) {
	row := readyRow("r1")
	row.Status, row.Reason, row.StatusMessage = domain.StatusHibernated, domain.ReasonHibernated, "hibernated at generation 1"
	row.State = map[string]any{"hibernated": true}
	s.state.add(row)
	s.state.updateArgs("r1", map[string]any{"slots": 3})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	got := s.state.waitRow(c, "r1", "ready", ready(2))
	s.state.waitIdle(c, "r1", 1)
	c.Check(got.StatusMessage, gc.Equals, "ready at generation 2")
	updates := s.state.progress("r1")
	c.Assert(updates, gc.HasLen, 3)
	c.Check(updates[0].Status, gc.Equals, domain.StatusProvisioning)
	c.Check(updates[0].StatusMessage, gc.Equals, "waking generation 2")
	c.Check(updates[1].StatusMessage, gc.Equals, "waking generation 2: waiting for it to serve")
	c.Check(reasons(updates), gc.DeepEquals, []domain.Reason{domain.ReasonProvisioning, domain.ReasonAwaitingReady, domain.ReasonAvailable})
	c.Check(s.env.lastInput().State, gc.DeepEquals, map[string]any{"hibernated": true})
	c.Check(s.env.lastOpts().Args, gc.DeepEquals, map[string]any{"slots": 3})
	c.Check(s.env.lastOpts().Labels, gc.DeepEquals, map[string]string{"team": "data"})
	c.Check(s.env.callCount("hibernate"), gc.Equals, 0)
}

// A failed hibernate stays hibernating and is retried with backoff.
func (s *workerSuite) TestHibernateFailureRetried(c *gc.C) {
	s.state.add(readyRow("r1"))
	s.state.setHibernate("r1", true)
	s.env.script("hibernate", errors.New("api unreachable"))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "failure recorded", func(r *domain.Resource) bool { return r.Attempts == 1 })
	s.state.waitIdle(c, "r1", 1)
	due := epoch.Add(backoffBase / 2)
	c.Check(row.Status, gc.Equals, domain.StatusHibernating)
	c.Check(row.Reason, gc.Equals, domain.ReasonBackoff)
	c.Check(row.NextAttemptAt, gc.DeepEquals, &due)
	c.Check(row.LastError, gc.Equals, "hibernate: api unreachable")
	c.Check(row.StatusMessage, gc.Equals, "hibernate attempt 1 failed: hibernate: api unreachable; retrying at 2025-03-01T12:00:05Z")

	c.Assert(s.clock.WaitAdvance(backoffBase/2, testkit.LongWait, 1), gc.IsNil)
	row = s.state.waitRow(c, "r1", "hibernated", func(r *domain.Resource) bool { return r.Status == domain.StatusHibernated })
	c.Check(row.Attempts, gc.Equals, 0)
	c.Check(row.LastError, gc.Equals, "")
	// The retry records its start again, as a provisioning retry does.
	updates := s.state.progress("r1")
	c.Check(statuses(updates), gc.DeepEquals, []domain.Status{
		domain.StatusHibernating, domain.StatusHibernating, domain.StatusHibernating, domain.StatusHibernated,
	})
	c.Check(updates[2].StatusMessage, gc.Equals, "hibernating generation 1")
	c.Check(reasons(updates), gc.DeepEquals, []domain.Reason{
		domain.ReasonHibernating, domain.ReasonBackoff, domain.ReasonHibernating, domain.ReasonHibernated,
	})
	c.Check(s.metrics.waitOutcomes(c, 2), gc.DeepEquals, []string{provisioner.OutcomeRetry, provisioner.OutcomeHibernated})
}

// An environ that cannot hibernate fails the resource for good, saying which provisioner
// and how to get out of it; waking it provisions it again.
func (s *workerSuite) TestEnvironThatCannotHibernate(c *gc.C) {
	s.set.Environs["pool"] = &s.env.Environ // the broker without Hibernate
	s.state.add(readyRow("r1"))
	s.state.setHibernate("r1", true)
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "error", func(r *domain.Resource) bool { return r.Status == domain.StatusError })
	s.state.waitIdle(c, "r1", 1)
	c.Check(row.StatusMessage, gc.Equals, `provisioner "pool" (fake) cannot hibernate resources: wake the resource (berth resource wake r1) or delete it`)
	c.Check(row.Reason, gc.Equals, domain.ReasonBrokerError)
	c.Check(row.LastError, gc.Equals, row.StatusMessage)
	c.Check(row.NextAttemptAt, gc.IsNil)
	c.Check(s.metrics.waitOutcomes(c, 1), gc.DeepEquals, []string{provisioner.OutcomePermanent})

	s.watcher.send(c, "r1")
	s.state.waitIdle(c, "r1", 2)
	c.Check(s.state.progress("r1"), gc.HasLen, 1)

	s.state.setHibernate("r1", false)
	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
}

// A resource nothing was provisioned for has nothing to stop: it is hibernated at once, and
// the claim does not start provisioning it.
func (s *workerSuite) TestHibernateNeverProvisioned(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Hibernate: true})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	row := s.state.waitRow(c, "r1", "hibernated", func(r *domain.Resource) bool { return r.Status == domain.StatusHibernated })
	c.Check(s.state.started("r1"), gc.HasLen, 0)
	c.Check(s.env.callCount("hibernate"), gc.Equals, 0)
	c.Check(row.Provisioner, gc.Equals, "")

	s.state.setHibernate("r1", false)
	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
	c.Check(s.state.progress("r1")[1].StatusMessage, gc.Equals, "waking generation 1")
}

// A permanent failure is tried again at once when a retry is requested.
func (s *workerSuite) TestRetryRequestedAfterPermanentFailure(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	s.env.script("reconcile", environ.Permanent(errors.New("quota exceeded")))
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "error", func(r *domain.Resource) bool { return r.Status == domain.StatusError })
	s.state.waitIdle(c, "r1", 1)

	s.state.requestRetry("r1")
	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
	c.Check(s.env.callCount("reconcile"), gc.Equals, 2)
}

// Labels reach the environ on every reconcile.
func (s *workerSuite) TestLabelsPassedToReconcile(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Labels: map[string]string{"team": "data", "tier": "prod"}})
	w := s.start(c, s.config())
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
	c.Check(s.env.lastOpts().Labels, gc.DeepEquals, map[string]string{"team": "data", "tier": "prod"})
}
