// Package fairqueue is a queue of ids that serves their owners in weighted turns, so that a
// burst from one owner neither starves nor delays the others.
//
// Each owner has a first-in first-out queue of its own; the owners with ids queued take turns
// in a ring, in the order they first had some queued, and in its turn an owner gives up to
// its weight of ids (deficit round robin where every id costs one). An owner that empties
// its queue leaves the ring and forgets its unused turn; one that queues again joins the end.
// While several owners have ids queued, each is served in proportion to its weight, and a
// newcomer is served within one round (the sum of the other owners' weights); an owner alone
// is served exactly first in, first out.
//
// A Queue is not safe for concurrent use.
package fairqueue

import "slices"

// DefaultWeight is the weight of an owner the weights do not name.
const DefaultWeight = 1

// Item is a queued id and its owner.
type Item struct {
	Owner, ID string
}

// Queue is a fair queue of ids; the zero value is not usable: call New.
type Queue struct {
	fifos   map[string][]string // each owner's queued ids, oldest first; no empty one
	ring    []string            // the owners with ids queued, in turn order
	turn    int                 // the index in ring of the owner whose turn it is
	credit  int                 // how many more ids that owner gives in this turn; 0: its turn starts
	weights map[string]int
	n       int
}

// New returns an empty queue in which every owner has DefaultWeight.
func New() *Queue {
	return &Queue{fifos: make(map[string][]string)}
}

// SetWeights sets the owners' weights; an owner weights does not name, or names with a
// weight below 1, has DefaultWeight. A turn under way keeps the credit it started with.
func (q *Queue) SetWeights(weights map[string]int) {
	q.weights = weights
}

// Weight returns owner's weight.
func (q *Queue) Weight(owner string) int {
	if w := q.weights[owner]; w >= 1 {
		return w
	}
	return DefaultWeight
}

// Push queues id for owner, after owner's other ids. The queue does not look for repeats:
// the caller queues an id once.
func (q *Queue) Push(owner, id string) {
	f, ok := q.fifos[owner]
	if !ok {
		q.ring = append(q.ring, owner)
	}
	q.fifos[owner] = append(f, id)
	q.n++
}

// Len returns how many ids are queued.
func (q *Queue) Len() int { return q.n }

// Owners returns how many owners have ids queued.
func (q *Queue) Owners() int { return len(q.ring) }

// DepthsInto makes depths how many ids each owner with ids queued has queued: a map the
// caller keeps, filled again in place, since a caller that publishes the depths after every
// change would otherwise make a map each time.
func (q *Queue) DepthsInto(depths map[string]int) {
	clear(depths)
	for owner, f := range q.fifos {
		depths[owner] = len(f)
	}
}

// Peek returns the next n ids Pop would return (fewer when fewer are queued), leaving the
// queue as it is.
func (q *Queue) Peek(n int) []Item {
	var out []Item
	q.walk(n, func(it Item) { out = append(out, it) })
	return out
}

// Pop takes the next id.
func (q *Queue) Pop() (Item, bool) {
	var out Item
	return out, q.Take(1, func(it Item) { out = it }) == 1
}

// Take takes the next n ids (fewer when fewer are queued), in order, handing each to take,
// and returns how many it took.
func (q *Queue) Take(n int, take func(Item)) int {
	next := q.walk(n, take)
	for owner, k := range next.taken {
		f := q.fifos[owner]
		if k == len(f) {
			delete(q.fifos, owner)
			continue
		}
		clear(f[:k]) // let the taken ids go
		q.fifos[owner] = f[k:]
	}
	q.ring, q.turn, q.credit = next.ring, next.turn, next.credit
	q.n -= next.count
	return next.count
}

// position is where the turns stand after some ids are taken.
type position struct {
	ring          []string
	turn, credit  int
	taken         map[string]int // how many ids of each owner are taken
	count         int
	ringIsPrivate bool // ring is a copy of the queue's and may be changed in place
}

// walk visits the next n ids in the order they are served, without changing the queue, and
// returns where the turns stand after them. Peek and Take share it, so that a Take after a
// Peek of the same n takes what the Peek saw.
func (q *Queue) walk(n int, visit func(Item)) position {
	p := position{ring: q.ring, turn: q.turn, credit: q.credit, taken: make(map[string]int)}
	for p.count < n && len(p.ring) > 0 {
		owner := p.ring[p.turn]
		if p.credit == 0 {
			p.credit = q.Weight(owner)
		}
		f := q.fifos[owner]
		k := p.taken[owner]
		visit(Item{Owner: owner, ID: f[k]})
		p.taken[owner] = k + 1
		p.count++
		p.credit--
		switch {
		case k+1 == len(f): // the owner's queue is empty: it leaves the ring
			if !p.ringIsPrivate {
				p.ring, p.ringIsPrivate = slices.Clone(p.ring), true
			}
			p.ring = slices.Delete(p.ring, p.turn, p.turn+1)
			p.credit = 0
			if p.turn >= len(p.ring) {
				p.turn = 0
			}
		case p.credit == 0:
			p.turn = (p.turn + 1) % len(p.ring)
		}
	}
	return p
}
