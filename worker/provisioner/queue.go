package provisioner

import (
	"container/heap"
	"time"
)

// schedule is the loop's bookkeeping of which resources to reconcile and when. Only the loop
// goroutine touches it. An id is in at most one of three places: the FIFO queue (reconcile as
// soon as a slot is free), running (a reconcile is in flight; a change marks it dirty), or the
// retry heap (reconcile at a time). Resources waiting for capacity are also remembered by
// provisioner, so that a deprovision can wake them before their retry is due.
type schedule struct {
	queue    []string
	queued   map[string]bool
	running  map[string]bool
	awaiting map[string]bool // of running: waiting for the resource to serve, place given back
	dirty    map[string]bool
	retries  retryHeap
	retryOf  map[string]*retry
	capacity map[string]string // id -> provisioner it waits for capacity on
	woken    map[string]bool   // ids queued because capacity was freed
}

func newSchedule() *schedule {
	return &schedule{
		queued:   make(map[string]bool),
		running:  make(map[string]bool),
		awaiting: make(map[string]bool),
		dirty:    make(map[string]bool),
		retryOf:  make(map[string]*retry),
		capacity: make(map[string]string),
		woken:    make(map[string]bool),
	}
}

// enqueue asks for id to be reconciled now. A scheduled retry of id is dropped: the reconcile
// decides afresh when (if ever) to retry. An id in flight is marked dirty instead, so that it
// runs again once the current reconcile ends and never twice at once.
func (s *schedule) enqueue(id string) {
	s.cancelRetry(id)
	switch {
	case s.running[id]:
		s.dirty[id] = true
	case !s.queued[id]:
		s.queued[id] = true
		s.queue = append(s.queue, id)
	}
}

// start takes the next queued id and marks it running, if fewer than limit are running
// besides those awaiting their resource, and fewer than limit + awaitLimit in all. woken says
// it was queued because capacity was freed for it.
func (s *schedule) start(limit, awaitLimit int) (id string, woken, ok bool) {
	if len(s.running)-len(s.awaiting) >= limit || len(s.running) >= limit+awaitLimit || len(s.queue) == 0 {
		return "", false, false
	}
	id = s.queue[0]
	s.queue[0] = ""
	s.queue = s.queue[1:]
	woken = s.woken[id]
	delete(s.queued, id)
	delete(s.woken, id)
	delete(s.capacity, id)
	s.running[id] = true
	return id, woken, true
}

// await notes that id's reconcile waits for its resource to serve: it gives its place back
// while it stays in flight.
func (s *schedule) await(id string) {
	if s.running[id] {
		s.awaiting[id] = true
	}
}

// finish ends id's reconcile and applies its outcome.
func (s *schedule) finish(o outcome) {
	delete(s.running, o.id)
	delete(s.awaiting, o.id)
	dirty := s.dirty[o.id]
	delete(s.dirty, o.id)
	if o.waitingFor != "" {
		s.capacity[o.id] = o.waitingFor
	}
	switch {
	case dirty || o.requeue:
		s.enqueue(o.id)
	case !o.retryAt.IsZero():
		s.retryAt(o.id, o.retryAt)
	}
	if o.freed != "" {
		s.wake(o.freed)
	}
}

// wake enqueues every resource waiting for capacity on provisioner.
func (s *schedule) wake(provisioner string) {
	for id, p := range s.capacity {
		if p == provisioner {
			delete(s.capacity, id)
			s.enqueue(id)
			s.woken[id] = true
		}
	}
}

// retryAt schedules id to be reconciled at t, replacing an earlier schedule of id.
func (s *schedule) retryAt(id string, t time.Time) {
	if r, ok := s.retryOf[id]; ok {
		r.at = t
		heap.Fix(&s.retries, r.index)
		return
	}
	r := &retry{id: id, at: t}
	heap.Push(&s.retries, r)
	s.retryOf[id] = r
}

func (s *schedule) cancelRetry(id string) {
	if r, ok := s.retryOf[id]; ok {
		heap.Remove(&s.retries, r.index)
		delete(s.retryOf, id)
	}
}

// due enqueues every retry whose time is not after now, earliest first.
func (s *schedule) due(now time.Time) {
	for len(s.retries) > 0 && !s.retries[0].at.After(now) {
		r := heap.Pop(&s.retries).(*retry)
		delete(s.retryOf, r.id)
		s.enqueue(r.id)
	}
}

// nextRetry returns the time of the earliest scheduled retry.
func (s *schedule) nextRetry() (time.Time, bool) {
	if len(s.retries) == 0 {
		return time.Time{}, false
	}
	return s.retries[0].at, true
}

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
