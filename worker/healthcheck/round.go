package healthcheck

import (
	"context"
	"reflect"
	"slices"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/clocktimeout"
	"github.com/berth-dev/berth/internal/rendezvous"
)

// round is the loop's cursor through one round.
type round struct {
	seq       int
	start     time.Time
	end       time.Time            // start + Interval: no check of the round is due later
	agents    []string             // the live agents, sorted, this one among them
	expected  int                  // checks the round expects to make, for pacing
	index     int                  // checks dispatched so far
	slotStart time.Time            // where the next check's slot begins
	lastDue   time.Time            // when the check drawn last was due
	page      []domain.Resource    // the current page, from pos on not yet dispatched
	prepared  map[string]*prepared // the current page's prepared checks, by provisioner
	pos       int
	after     string    // the last id read
	headDue   time.Time // when page[pos] is due; zero until drawn
	deferred  int       // resources read that were created after the round started
	read      int       // resources read that were created before: of every agent's share
	own       int       // of those, the ones in this agent's share
	// ownDeferred are the deferred resources of this agent's share, for the report.
	ownDeferred int
	exhausted   bool // every page read
}

// mine reports whether the resource id is in the share of self, the agent running the
// round: whether it is id's rendezvous owner among the round's agents.
func (r *round) mine(self, id string) bool {
	return len(r.agents) == 1 || rendezvous.Owner(r.agents, id) == self
}

// drawHeadDue places page[pos] at a random point of its slot. The time left until the round
// ends is shared evenly among the checks still expected (at least the rest of the page), so
// the pace adapts when more resources turn up than were counted, and no check is due after
// the round's end.
func (r *round) drawHeadDue(rand float64) {
	left := max(r.expected-r.index, len(r.page)-r.pos, 1)
	slot := r.end.Sub(r.slotStart) / time.Duration(left)
	r.headDue = r.slotStart.Add(time.Duration(rand * float64(slot)))
	r.lastDue = r.headDue
	r.slotStart = r.slotStart.Add(slot)
}

// prepared are the checks an environ prepared for the resources of one page.
type prepared struct {
	env    environ.Environ
	checks environ.PreparedChecks
}

// current reports whether env is still the environ that prepared the checks: the provisioner
// set may have been replaced since the page was read.
func (p *prepared) current(env environ.Environ) bool {
	return p != nil && reflect.TypeOf(env).Comparable() && env == p.env
}

// startRound reads the live agents, counts the checkable resources and returns the new
// round's cursor. Until its pages say otherwise the round expects an even share of the
// resources: rendezvous owners are spread evenly.
func (w *Worker) startRound(ctx context.Context, seq int, now time.Time, previous []string) *round {
	agents := w.liveAgents(ctx)
	if previous != nil && !slices.Equal(agents, previous) {
		w.config.Logger.Info("health checks are now shared among these agents", "agents", agents, "previous", previous)
	}
	expected := w.config.PageSize
	if n, err := w.countCheckable(ctx); err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot count resources; pacing this round's checks by page size", "error", err)
		}
	} else {
		expected = (n + len(agents) - 1) / len(agents)
	}
	r := &round{seq: seq, start: now, end: now.Add(w.config.Interval), agents: agents, expected: expected, slotStart: now}
	w.mu.Lock()
	w.lastRound = w.round
	w.round = roundStats{seq: seq, started: now, ends: r.end, agents: len(agents), resources: expected}
	w.mu.Unlock()
	return r
}

// liveAgents returns the ids of the live agents, sorted. This agent's own id is among them
// even when its row is not listed live (it has just started, or its heartbeat is late), so
// that its share is checked by someone: at worst by it and by another agent for a round.
// When the agents cannot be listed it returns this agent alone, so that the round checks
// every resource rather than none. Without Agents it is alone.
func (w *Worker) liveAgents(ctx context.Context) []string {
	self := w.config.Agent.ID
	if w.config.Agents == nil {
		return []string{self}
	}
	listed, err := w.config.Agents.ListAgents(ctx, w.config.Agent.TTL)
	if err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot list the live agents; this round checks every resource, other agents' shares too", "error", err)
			w.mu.Lock()
			w.lastAgentsError = err.Error()
			w.mu.Unlock()
		}
		return []string{self}
	}
	return domain.LiveAgentIDs(listed, self)
}

// countCheckable counts the resources that are ready or unhealthy.
func (w *Worker) countCheckable(ctx context.Context) (int, error) {
	counts, err := w.config.Store.CountResourcesByStatus(ctx)
	if err != nil {
		return 0, err
	}
	return counts[domain.StatusReady] + counts[domain.StatusUnhealthy], nil
}

// nextPage reads the page after r.after and keeps the resources of this agent's share,
// leaving out those created after the round started (the next round checks them); an empty
// page, or an error, ends the round's checks. A page that takes the round past the checks it
// expected counts the resources again, so that the round's pace adapts.
func (w *Worker) nextPage(ctx context.Context, r *round) {
	page, err := w.config.Store.ListCheckable(ctx, r.after, w.config.PageSize, w.config.Agent.ID)
	if err != nil {
		r.exhausted = true
		if ctx.Err() == nil {
			w.config.Logger.Warn("cannot list resources to check; the next round starts over", "error", err)
			w.mu.Lock()
			w.lastListError = err.Error()
			w.mu.Unlock()
		}
		return
	}
	if len(page) == 0 {
		w.readAll(r)
		return
	}
	r.after = page[len(page)-1].ID
	eligible := page[:0]
	for _, res := range page {
		mine := r.mine(w.config.Agent.ID, res.ID)
		if res.CreatedAt.After(r.start) {
			r.deferred++
			if mine {
				r.ownDeferred++
			}
			continue
		}
		r.read++
		if mine {
			r.own++
			eligible = append(eligible, res)
		}
	}
	r.page, r.pos = eligible, 0
	if r.index+len(eligible) > r.expected {
		w.recount(ctx, r)
	}
	w.mu.Lock()
	w.round.deferred = r.ownDeferred
	w.round.share = r.own
	w.round.resources = r.expected
	w.mu.Unlock()
	r.prepared = w.prepare(ctx, eligible)
}

// recount raises the checks r expects to those of its share read so far plus its share of
// the resources checkable now that it has not read yet, less those it has already left for
// the next round. The share of those not read is taken to be the share of those read (all
// of them for one agent). Resources created since the round started but not read yet are
// counted too, so the estimate errs on the side of a faster pace: the round ends early
// rather than late. The slots handed out so far were shared among too few checks, so what
// is left of them after the last check's due time is shared again. It is called with
// resources read (r.read > 0).
func (w *Worker) recount(ctx context.Context, r *round) {
	n, err := w.countCheckable(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.config.Logger.Debug("cannot count resources again; pacing the round by what it has read", "error", err)
		}
		return
	}
	unread := max(n-r.deferred-r.read, 0)
	expected := r.own + (unread*r.own+r.read-1)/r.read
	if expected <= r.expected {
		return
	}
	r.expected = expected
	if !r.lastDue.IsZero() {
		r.slotStart = r.lastDue
	}
}

// readAll notes that every page of r is read, and warns when that came well after the
// round's end (by more than a tenth of the interval): its last checks were dispatched late,
// because checks take too long for the concurrency.
func (w *Worker) readAll(r *round) {
	r.exhausted = true
	if late := w.config.Clock.Now().Sub(r.end); late > w.config.Interval/10 {
		w.config.Logger.Warn("health-check round ran past its interval: its last checks were late; raise the concurrency or the interval",
			"interval", w.config.Interval, "late", late, "checks", r.index, "concurrency", w.config.Concurrency)
	}
}

// prepare lets each environ of the page that can prepare its resources' checks at once do so.
// An environ that fails to has its resources checked one at a time.
func (w *Worker) prepare(ctx context.Context, page []domain.Resource) map[string]*prepared {
	var names []string
	ids := make(map[string][]string)
	for _, r := range page {
		if _, seen := ids[r.Provisioner]; !seen {
			names = append(names, r.Provisioner)
		}
		ids[r.Provisioner] = append(ids[r.Provisioner], r.ID)
	}
	out := make(map[string]*prepared)
	for _, name := range names {
		env, _, err := w.config.Environs.Get(name)
		if err != nil {
			continue // each check reports it
		}
		preparer, ok := env.(environ.CheckPreparer)
		if !ok {
			continue
		}
		prepCtx, cancel := clocktimeout.WithTimeout(ctx, w.config.Clock, w.config.CheckTimeout)
		checks, err := preparer.PrepareChecks(prepCtx, ids[name])
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.config.Logger.Warn("cannot prepare a page of checks; checking its resources one at a time",
					"provisioner", name, "resources", len(ids[name]), "error", err)
			}
			continue
		}
		out[name] = &prepared{env: env, checks: checks}
	}
	return out
}
