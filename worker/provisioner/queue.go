package provisioner

import (
	"container/heap"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/fairqueue"
)

// schedule is the loop's bookkeeping of which resources to reconcile and when. Only the loop
// goroutine touches it. Each resource it knows has one entry, whose placement says the one place
// the resource is in: the queue (reconcile as soon as a slot is free), running (a reconcile
// is in flight; a change marks it dirty), or the retry heap (reconcile at a time).
// Resources waiting for capacity also remember the provisioner, so that a deprovision can
// wake them before their retry is due.
//
// The queue is fair between owners: each owner's resources wait first in, first out, and
// the owners take turns by weight (see fairqueue), so that one owner's burst does not keep
// another's resource waiting behind it. An owner alone is served in order.
type schedule struct {
	entries map[string]*entry
	queue   *fairqueue.Queue // the ids of the queued entries, by owner
	retries retryHeap        // the retries of the retrying entries, earliest first

	// counts is the sum of the entries' counts. The entries answer it, but the loop's limits
	// and report read it on every turn, and counting would visit every entry, a backlog of
	// thousands retrying included; so sync keeps the sum as each entry changes.
	counts counts
}

// counts are how many entries are in flight, in flight awaiting their resource, and waiting
// on a provisioner: for capacity, for their owner's quota, or for its broker's breaker.
type counts struct {
	inFlight, awaiting                                    int
	waitingForCapacity, waitingForQuota, waitingForBroker int
}

func (c counts) plus(d counts) counts {
	return counts{c.inFlight + d.inFlight, c.awaiting + d.awaiting,
		c.waitingForCapacity + d.waitingForCapacity, c.waitingForQuota + d.waitingForQuota, c.waitingForBroker + d.waitingForBroker}
}

func (c counts) minus(d counts) counts {
	return counts{c.inFlight - d.inFlight, c.awaiting - d.awaiting,
		c.waitingForCapacity - d.waitingForCapacity, c.waitingForQuota - d.waitingForQuota, c.waitingForBroker - d.waitingForBroker}
}

// place is where a resource is in the schedule.
type place int

const (
	// idle: in no place, remembered only while it waits for capacity.
	idle place = iota
	queued
	running
	retrying
)

// entry is what the schedule knows of one resource: its placement, and what of it the
// schedule's counts hold.
type entry struct {
	placement
	owner   string // the resource's owner, which never changes
	counted counts // only sync writes it
}

// placement is where a resource is in the schedule and what that place remembers of it. The
// fields other than place and waitingFor only have a meaning in one place, and are cleared
// when the entry leaves it.
type placement struct {
	place    place
	dirty    bool   // running: changed since its reconcile started, so runs again after it
	awaiting bool   // running: waits for its resource to serve, its place given back
	woken    bool   // queued: because capacity was freed for it
	retry    *retry // retrying: its element in the retry heap
	// waitingFor is the provisioner it waits on (domain.WaitingReasons: capacity, its
	// owner's quota or the broker), until it next starts; waitingReason says which.
	waitingFor    string
	waitingReason domain.Reason
}

// counts is what an entry so placed adds to the schedule's counts.
func (p placement) counts() counts {
	return counts{
		inFlight:           btoi(p.place == running),
		awaiting:           btoi(p.place == running && p.awaiting),
		waitingForCapacity: btoi(p.waitingFor != "" && p.waitingReason != domain.ReasonQuotaExceeded && p.waitingReason != domain.ReasonBrokerUnavailable),
		waitingForQuota:    btoi(p.waitingFor != "" && p.waitingReason == domain.ReasonQuotaExceeded),
		waitingForBroker:   btoi(p.waitingFor != "" && p.waitingReason == domain.ReasonBrokerUnavailable),
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newSchedule() *schedule {
	return &schedule{entries: make(map[string]*entry), queue: fairqueue.New()}
}

// setWeights sets the owners' weights in the queue (an owner not named has weight 1).
func (s *schedule) setWeights(weights map[string]int) {
	s.queue.SetWeights(weights)
}

// entry returns id's entry, adding an idle one of owner if the schedule has none.
func (s *schedule) entry(id, owner string) *entry {
	e, ok := s.entries[id]
	if !ok {
		e = &entry{owner: owner}
		s.entries[id] = e
	}
	return e
}

// sync brings the counts in step with id's entry after a change, and forgets an entry with
// nothing left to remember (and so nothing counted). Every change to an entry ends with it.
func (s *schedule) sync(id string) {
	e, ok := s.entries[id]
	if !ok {
		return
	}
	now := e.counts()
	s.counts = s.counts.minus(e.counted).plus(now)
	e.counted = now
	if e.place == idle && e.waitingFor == "" {
		delete(s.entries, id)
	}
}

// pending says whether id is queued or in flight, and so will be reconciled without being
// queued again.
func (s *schedule) pending(id string) bool {
	e, ok := s.entries[id]
	return ok && (e.place == queued || e.place == running)
}

// enqueue asks for id, of owner, to be reconciled now. A scheduled retry of id is dropped:
// the reconcile decides afresh when (if ever) to retry. An id in flight is marked dirty
// instead, so that it runs again once the current reconcile ends and never twice at once.
func (s *schedule) enqueue(id, owner string) {
	e := s.entry(id, owner)
	if e.place == retrying {
		heap.Remove(&s.retries, e.retry.index)
		e.place, e.retry = idle, nil
	}
	switch e.place {
	case running:
		e.dirty = true
	case idle:
		e.place = queued
		s.queue.Push(e.owner, id)
	}
	s.sync(id)
}

// start takes the next queued id, its owner's turn come, and marks it running, if fewer
// than limit are running besides those awaiting their resource, and fewer than limit +
// awaitLimit in all. woken says it was queued because capacity was freed for it.
func (s *schedule) start(limit, awaitLimit int) (id string, woken, ok bool) {
	if s.inFlight()-s.awaitingReady() >= limit || s.inFlight() >= limit+awaitLimit || s.queue.Len() == 0 {
		return "", false, false
	}
	next, _ := s.queue.Pop()
	id = next.ID
	e := s.entries[id]
	woken = e.woken
	e.placement = placement{place: running}
	s.sync(id)
	return id, woken, true
}

// await notes that id's reconcile waits for its resource to serve: it gives its place back
// while it stays in flight.
func (s *schedule) await(id string) {
	if e, ok := s.entries[id]; ok && e.place == running {
		e.awaiting = true
		s.sync(id)
	}
}

// finish ends id's reconcile and applies its outcome.
func (s *schedule) finish(o outcome) {
	e := s.entry(o.id, "")
	dirty, owner := e.dirty, e.owner
	if e.place == running {
		e.place, e.dirty, e.awaiting = idle, false, false
	}
	if o.waitingFor != "" {
		e.waitingFor, e.waitingReason = o.waitingFor, o.waitingReason
	}
	s.sync(o.id)
	switch {
	case dirty || o.requeue:
		s.enqueue(o.id, owner)
	case !o.retryAt.IsZero():
		s.retryAt(o.id, owner, o.retryAt)
	}
	if o.freed != "" {
		s.wake(o.freed)
	}
}

// wake enqueues every resource waiting for capacity on provisioner.
func (s *schedule) wake(provisioner string) {
	for id, e := range s.entries {
		if e.waitingFor == provisioner {
			e.waitingFor, e.waitingReason = "", ""
			s.enqueue(id, e.owner)
			e.woken = e.place == queued
		}
	}
}

// retryAt schedules id, of owner, to be reconciled at t, replacing an earlier schedule of
// id. An id queued or in flight is left as it is: it is reconciled sooner, and that
// reconcile decides afresh when to retry.
func (s *schedule) retryAt(id, owner string, t time.Time) {
	e := s.entry(id, owner)
	switch e.place {
	case retrying:
		e.retry.at = t
		heap.Fix(&s.retries, e.retry.index)
	case idle:
		e.place, e.retry = retrying, &retry{id: id, at: t}
		heap.Push(&s.retries, e.retry)
	}
	s.sync(id)
}

// due enqueues every retry whose time is not after now, earliest first.
func (s *schedule) due(now time.Time) {
	for len(s.retries) > 0 && !s.retries[0].at.After(now) {
		r := heap.Pop(&s.retries).(*retry)
		e := s.entries[r.id]
		e.place, e.retry = idle, nil
		s.enqueue(r.id, e.owner)
	}
}

// nextRetry returns the time of the earliest scheduled retry.
func (s *schedule) nextRetry() (time.Time, bool) {
	if len(s.retries) == 0 {
		return time.Time{}, false
	}
	return s.retries[0].at, true
}

// queueDepth is how many entries are queued.
func (s *schedule) queueDepth() int { return s.queue.Len() }

// queueDepthsInto makes depths how many entries each owner with some queued has queued.
func (s *schedule) queueDepthsInto(depths map[string]int) { s.queue.DepthsInto(depths) }

// inFlight is how many entries are running, those awaiting their resource included.
func (s *schedule) inFlight() int { return s.counts.inFlight }

// awaitingReady is how many entries in flight wait for their resource to serve.
func (s *schedule) awaitingReady() int { return s.counts.awaiting }

// waitingForCapacity is how many entries wait for capacity on a provisioner.
func (s *schedule) waitingForCapacity() int { return s.counts.waitingForCapacity }

// waitingForQuota is how many entries wait for their owner's quota on a provisioner.
func (s *schedule) waitingForQuota() int { return s.counts.waitingForQuota }

// waitingForBroker is how many entries wait for a provisioner's breaker to close.
func (s *schedule) waitingForBroker() int { return s.counts.waitingForBroker }

// scheduledRetries is how many entries are retrying.
func (s *schedule) scheduledRetries() int { return len(s.retries) }

// retry is a resource due to be reconciled at a time.
type retry struct {
	id    string
	at    time.Time
	index int
}

// retryHeap is a min-heap of retries by time (container/heap).
type retryHeap []*retry

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h retryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *retryHeap) Push(x any) {
	r := x.(*retry)
	r.index = len(*h)
	*h = append(*h, r)
}

func (h *retryHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return r
}
