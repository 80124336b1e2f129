package provisioner_test

import (
	"context"
	"fmt"
	"maps"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/watcher"
)

// fakeOwners lists fixed owner policies.
type fakeOwners []domain.OwnerPolicy

func (o fakeOwners) ListOwnerPolicies(context.Context) ([]domain.OwnerPolicy, error) {
	return o, nil
}

// owned makes a watcher event of n ids of owner, named prefix0 … prefix(n-1), and adds
// each to the fake state.
func (s *workerSuite) owned(owner, prefix string, n int) []watcher.Owned {
	out := make([]watcher.Owned, n)
	for i := range out {
		out[i] = watcher.Owned{ID: fmt.Sprintf("%s%d", prefix, i), Owner: owner}
		s.state.add(domain.Resource{ID: out[i].ID, Owner: owner})
	}
	return out
}

// enteredIDs lets n gated reconciles through, one at a time, and returns the ids of the n
// that entered, in order.
func (s *workerSuite) enteredIDs(c *gc.C, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s.env.entered.Next(c)
		s.env.gate.Open(c)
	}
	return out
}

// An owner whose work arrives behind another owner's backlog is served in the next turn,
// not after the backlog.
func (s *workerSuite) TestOwnersTakeTurnsInTheQueue(c *gc.C) {
	s.env.gateReconcile = true
	cfg := s.config()
	cfg.Concurrency = 1
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.sendOwned(c, s.owned("alice", "a", 5)...)
	c.Assert(s.env.entered.Next(c), gc.Equals, "reconcile:a0")
	s.watcher.sendOwned(c, s.owned("bob", "b", 2)...)
	waitReport(c, w, "queue-depth", 6)
	s.env.gate.Open(c)

	c.Check(s.enteredIDs(c, 6), gc.DeepEquals, []string{
		"reconcile:a1", "reconcile:b0", "reconcile:a2", "reconcile:b1", "reconcile:a3", "reconcile:a4",
	})
}

// The owners' policies set their turns and their metrics classes, and the report lists the
// owners with most queued.
func (s *workerSuite) TestOwnerPoliciesSetTurnsClassesAndReport(c *gc.C) {
	s.env.gateReconcile = true
	cfg := s.config()
	cfg.Concurrency = 1
	cfg.Owners = fakeOwners{{Owner: "alice", Weight: 2, Class: "gold"}}
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	batch := append(s.owned("alice", "a", 4), s.owned("bob", "b", 3)...)
	s.watcher.sendOwned(c, batch...)
	c.Assert(s.env.entered.Next(c), gc.Equals, "reconcile:a0")
	waitReport(c, w, "queue-depth", 6)
	report := w.(interface{ Report() map[string]any }).Report()
	c.Check(fmt.Sprint(report["queue-depth-by-owner"]), gc.Equals, "[{alice 3} {bob 3}]")
	c.Check(report["queued-owners"], gc.Equals, 2)
	testkit.Eventually(c, func() error {
		s.metrics.mu.Lock()
		defer s.metrics.mu.Unlock()
		if want := map[string]int{"gold": 3, "": 3}; !maps.Equal(s.metrics.lastByClass, want) {
			return fmt.Errorf("depth by class %v, want %v", s.metrics.lastByClass, want)
		}
		return nil
	})
	s.env.gate.Open(c)

	// alice's turn of two goes on (a0 was its first), then bob's of one, and so on.
	c.Check(s.enteredIDs(c, 6), gc.DeepEquals, []string{
		"reconcile:a1", "reconcile:b0", "reconcile:a2", "reconcile:a3", "reconcile:b1", "reconcile:b2",
	})
}

// With owner labels allowed, the metrics count the queue by owner.
func (s *workerSuite) TestMetricsOwnerLabels(c *gc.C) {
	s.env.gateReconcile = true
	cfg := s.config()
	cfg.Concurrency = 1
	cfg.MetricsOwnerLabels = true
	cfg.Owners = fakeOwners{{Owner: "alice", Weight: 1, Class: "gold"}}
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.sendOwned(c, append(s.owned("alice", "a", 2), s.owned("", "d", 1)...)...)
	c.Assert(s.env.entered.Next(c), gc.Equals, "reconcile:a0")
	testkit.Eventually(c, func() error {
		s.metrics.mu.Lock()
		defer s.metrics.mu.Unlock()
		if want := map[string]int{"alice": 1, "": 1}; !maps.Equal(s.metrics.lastByClass, want) {
			return fmt.Errorf("depth by class %v, want %v", s.metrics.lastByClass, want)
		}
		return nil
	})
	s.env.gate.Open(c)
	s.enteredIDs(c, 2)
}
