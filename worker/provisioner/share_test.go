package provisioner_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/rendezvous"
	"github.com/berth-dev/berth/internal/testkit"
)

// fakeAgents lists the agents sharing the store.
type fakeAgents struct{ ids []string }

func (a fakeAgents) ListAgents(context.Context, time.Duration) ([]domain.Agent, error) {
	out := make([]domain.Agent, len(a.ids))
	for i, id := range a.ids {
		out[i] = domain.Agent{ID: id, Live: true}
	}
	return out, nil
}

const shareGrace = 2 * time.Second

// idsOwnedBy returns n resource ids whose rendezvous owner among agents is owner.
func idsOwnedBy(agents []string, owner string, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if id := fmt.Sprintf("r%03d", i); rendezvous.Owner(agents, id) == owner {
			out = append(out, id)
		}
	}
	return out
}

func (s *workerSuite) TestChangedResourcesAreFirstTheirOwnersWork(c *gc.C) {
	agents := []string{holder, "agent-2"}
	own := idsOwnedBy(agents, holder, 2)
	theirs := idsOwnedBy(agents, "agent-2", 2)
	for _, id := range append(append([]string{}, own...), theirs...) {
		s.state.add(domain.Resource{ID: id})
	}
	cfg := s.config()
	cfg.Agents, cfg.Agent.TTL, cfg.ShareGrace = fakeAgents{agents}, 15*time.Second, shareGrace
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, append(append([]string{}, own...), theirs...)...)
	for _, id := range own {
		s.state.waitRow(c, id, "ready", ready(1))
	}
	waitReport(c, w, "left-to-owners", 2)
	c.Check(s.state.claimCount(theirs[0]), gc.Equals, 0)
	c.Check(s.state.claimCount(theirs[1]), gc.Equals, 0)

	// The other agent took one of its two up meanwhile, and holds it.
	s.state.setLease(theirs[0], "agent-2", epoch.Add(time.Hour))
	c.Assert(s.clock.WaitAdvance(shareGrace, testkit.LongWait, 1), gc.IsNil)
	s.state.waitRow(c, theirs[1], "ready", ready(1))
	waitReport(c, w, "left-to-owners", 0)
	s.state.mu.Lock()
	c.Check(s.state.unclaimedAsked, gc.DeepEquals, theirs)
	s.state.mu.Unlock()
	c.Check(s.state.claimCount(theirs[0]), gc.Equals, 0)
}

func (s *workerSuite) TestAloneEveryChangeIsReconciledAtOnce(c *gc.C) {
	ids := idsOwnedBy([]string{holder, "agent-2"}, "agent-2", 2)
	for _, id := range ids {
		s.state.add(domain.Resource{ID: id})
	}
	cfg := s.config()
	cfg.Agents, cfg.Agent.TTL, cfg.ShareGrace = fakeAgents{[]string{holder}}, 15*time.Second, shareGrace
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, ids...)
	for _, id := range ids {
		s.state.waitRow(c, id, "ready", ready(1))
	}
	s.state.mu.Lock()
	c.Check(s.state.unclaimedAsked, gc.HasLen, 0)
	s.state.mu.Unlock()
}

// changingAgents lists the agents sharing the store as the test last set them, and counts
// the lists.
type changingAgents struct {
	mu    sync.Mutex
	ids   []string
	lists int
}

func (a *changingAgents) ListAgents(ctx context.Context, ttl time.Duration) ([]domain.Agent, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lists++
	return fakeAgents{a.ids}.ListAgents(ctx, ttl)
}

func (a *changingAgents) set(ids ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = ids
}

func (a *changingAgents) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lists
}

// A change is routed on a list of agents up to twice ShareGrace old, and the list is read
// again once the reconciles the change started are on their way: the next change is routed
// on the new list.
func (s *workerSuite) TestChangesAreRoutedBeforeTheAgentsAreListedAgain(c *gc.C) {
	agents := &changingAgents{ids: []string{holder}}
	ids := idsOwnedBy([]string{holder, "agent-2"}, "agent-2", 2)
	for _, id := range ids {
		s.state.add(domain.Resource{ID: id})
	}
	cfg := s.config()
	cfg.Agents, cfg.Agent.TTL, cfg.ShareGrace = agents, 15*time.Second, shareGrace
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)
	waitReport(c, w, "queue-depth", 0)
	c.Assert(agents.count(), gc.Equals, 1)

	agents.set(holder, "agent-2")
	s.clock.Advance(shareGrace + time.Millisecond)
	s.watcher.send(c, ids[0])
	s.state.waitRow(c, ids[0], "ready", ready(1))
	for deadline := time.Now().Add(testkit.LongWait); agents.count() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			c.Fatal("the agents were not listed again after the change was routed")
		}
	}
	s.watcher.send(c, ids[1])
	waitReport(c, w, "left-to-owners", 1)
	c.Check(s.state.claimCount(ids[1]), gc.Equals, 0)
	c.Check(agents.count(), gc.Equals, 2)
}
