package provisioner

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/clocktimeout"
)

// ownerPolicies is the loop's copy of the owners' policies: the queue's weights come from
// it, and the queue-depth metric's classes. Only the loop goroutine touches it.
type ownerPolicies struct {
	readAt  time.Time
	read    bool
	classes map[string]string // owner -> its class, for the owners whose class is not ""
}

// refreshOwners reads the owners' policies when the copy is OwnerPoliciesInterval old, and
// gives the queue their weights. A failed read keeps the policies read before: they set the
// order of the work, not whether it is done.
func (w *Worker) refreshOwners(ctx context.Context, s *schedule, p *ownerPolicies, now time.Time) {
	if w.config.Owners == nil || (p.read && now.Sub(p.readAt) < w.config.OwnerPoliciesInterval) {
		return
	}
	p.readAt, p.read = now, true
	ctx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, bookkeepingTimeout)
	defer cancel()
	policies, err := w.config.Owners.ListOwnerPolicies(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot read the owners' weights; keeping those read before", "error", err)
		}
		return
	}
	s.setWeights(domain.OwnerWeights(policies))
	p.classes = make(map[string]string)
	for _, policy := range policies {
		if policy.Class != "" {
			p.classes[policy.Owner] = policy.Class
		}
	}
}

// depthByClassInto makes out the owners' queue depths summed by class: the owner's class,
// or the owner itself when MetricsOwnerLabels allows owners as labels.
func (w *Worker) depthByClassInto(out, depths map[string]int, p *ownerPolicies) {
	clear(out)
	for owner, n := range depths {
		class := p.classes[owner]
		if w.config.MetricsOwnerLabels {
			class = owner
		}
		out[class] += n
	}
}

// ownerDepth is an owner's queue depth, as the engine report lists it.
type ownerDepth struct {
	Owner  string `json:"owner"`
	Queued int    `json:"queued"`
}

// topOwners lists the n owners with the most queued, most first (then by name).
func topOwners(depths map[string]int, n int) []ownerDepth {
	out := make([]ownerDepth, 0, len(depths))
	for owner, queued := range depths {
		out = append(out, ownerDepth{Owner: owner, Queued: queued})
	}
	slices.SortFunc(out, func(a, b ownerDepth) int {
		if c := cmp.Compare(b.Queued, a.Queued); c != 0 {
			return c
		}
		return cmp.Compare(a.Owner, b.Owner)
	})
	return out[:min(n, len(out))]
}
