package provisioner

import (
	"context"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/clocktimeout"
	"github.com/berth-dev/berth/internal/rendezvous"
	"github.com/berth-dev/berth/watcher"
)

// AgentLister lists the agents sharing the store (domain.State is one).
type AgentLister interface {
	ListAgents(ctx context.Context, ttl time.Duration) ([]domain.Agent, error)
}

// maxUnclaimedCheck bounds the resources one look at those left to other agents takes.
const maxUnclaimedCheck = 1000

// sharing is the loop's view of the agents it shares the work with: every agent's watcher
// reports every change, and each resource is first the work of its rendezvous owner among
// the live agents. The others leave it to the owner for ShareGrace, then take up what the
// owner has not (UnclaimedResources): the owner was busy, or stopped. Only the loop
// goroutine touches it.
type sharing struct {
	agents   []string // the live agents, sorted, this one included; one: alone
	listedAt time.Time
	left     []leftResource // left to their owners, in the order they are due
	isLeft   map[string]bool
}

// leftResource is a resource (and its owner, the tenant) left to its owner agent until at.
type leftResource struct {
	watcher.Owned
	at time.Time
}

// refreshAgents lists the live agents when the list is maxAge old. A failed list keeps the
// one before; none at all means alone, so that nothing is left undone.
func (w *Worker) refreshAgents(ctx context.Context, sh *sharing, now time.Time, maxAge time.Duration) {
	if w.config.Agents == nil || (sh.agents != nil && now.Sub(sh.listedAt) < maxAge) {
		return
	}
	ctx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, bookkeepingTimeout)
	defer cancel()
	listed, err := w.config.Agents.ListAgents(ctx, w.config.Agent.TTL)
	if err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot list the live agents; reconciling every changed resource here", "error", err)
		}
		if sh.agents == nil {
			sh.agents = []string{w.config.Agent.ID}
		}
		sh.listedAt = now
		return
	}
	sh.agents, sh.listedAt = domain.LiveAgentIDs(listed, w.config.Agent.ID), now
}

// route queues the ids of a watcher event: at once those this agent owns (and those it has
// in flight or queued already), the others once their owner had ShareGrace to take them.
// Rendezvous spreads every tenant's ids over the agents, so each agent's fair queue sees its
// share of every tenant's work and the turns hold across agents. It routes on a list of
// agents up to twice ShareGrace old: the loop lists them again once the reconciles the
// event started are on their way, so that the list is not read in the way of a change.
func (w *Worker) route(ctx context.Context, s *schedule, sh *sharing, batch []watcher.Owned) {
	now := w.config.Clock.Now()
	w.refreshAgents(ctx, sh, now, 2*w.config.ShareGrace)
	for _, o := range batch {
		if len(sh.agents) <= 1 || s.pending(o.ID) || rendezvous.Owner(sh.agents, o.ID) == w.config.Agent.ID {
			s.enqueue(o.ID, o.Owner)
			continue
		}
		if !sh.isLeft[o.ID] {
			sh.isLeft[o.ID] = true
			sh.left = append(sh.left, leftResource{Owned: o, at: now.Add(w.config.ShareGrace)})
		}
	}
}

// nextLeft returns when the first resource left to its owner is due to be looked at.
func (sh *sharing) nextLeft() (time.Time, bool) {
	if len(sh.left) == 0 {
		return time.Time{}, false
	}
	return sh.left[0].at, true
}

// takeUp looks at the resources left to their owners that are due, and queues those still
// unclaimed. When the store cannot say, it queues them all: a claim decides each then.
func (w *Worker) takeUp(ctx context.Context, s *schedule, sh *sharing) {
	now := w.config.Clock.Now()
	var due []string
	owners := make(map[string]string)
	for len(sh.left) > 0 && !sh.left[0].at.After(now) && len(due) < maxUnclaimedCheck {
		left := sh.left[0]
		sh.left[0] = leftResource{}
		sh.left = sh.left[1:]
		delete(sh.isLeft, left.ID)
		due = append(due, left.ID)
		owners[left.ID] = left.Owner
	}
	if len(due) == 0 {
		return
	}
	ctx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, bookkeepingTimeout)
	defer cancel()
	unclaimed, err := w.config.State.UnclaimedResources(ctx, due)
	if err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot tell which resources other agents left unclaimed; trying each", "count", len(due), "error", err)
		}
		unclaimed = due
	}
	for _, id := range unclaimed {
		s.enqueue(id, owners[id])
	}
}
