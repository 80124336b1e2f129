package provisioner

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
)

type scheduleSuite struct{}

var _ = gc.Suite(&scheduleSuite{})

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// drain starts every queued id, in order.
func drain(s *schedule) []string {
	var ids []string
	for {
		id, _, ok := s.start(100, 1)
		if !ok {
			return ids
		}
		ids = append(ids, id)
	}
}

func (*scheduleSuite) TestFIFOWithoutDuplicates(c *gc.C) {
	s := newSchedule()
	for _, id := range []string{"a", "b", "a", "c", "b"} {
		s.enqueue(id, "")
	}
	c.Check(drain(s), gc.DeepEquals, []string{"a", "b", "c"})
}

func (*scheduleSuite) TestLimit(c *gc.C) {
	s := newSchedule()
	s.enqueue("a", "")
	s.enqueue("b", "")
	id, _, ok := s.start(1, 1)
	c.Check(id, gc.Equals, "a")
	c.Check(ok, gc.Equals, true)
	_, _, ok = s.start(1, 1)
	c.Check(ok, gc.Equals, false)
	s.finish(outcome{id: "a"})
	id, _, _ = s.start(1, 1)
	c.Check(id, gc.Equals, "b")
}

func (*scheduleSuite) TestDirtyWhileRunning(c *gc.C) {
	s := newSchedule()
	s.enqueue("a", "")
	drain(s)
	s.enqueue("a", "")
	c.Check(drain(s), gc.HasLen, 0) // not twice at once
	s.finish(outcome{id: "a", retryAt: t0})
	c.Check(drain(s), gc.DeepEquals, []string{"a"}) // dirty wins over the retry
	c.Check(s.retries, gc.HasLen, 0)
}

func (*scheduleSuite) TestRetriesEarliestFirst(c *gc.C) {
	s := newSchedule()
	for i, id := range []string{"a", "b", "c"} {
		s.enqueue(id, "")
		drain(s)
		s.finish(outcome{id: id, retryAt: t0.Add(time.Duration(3-i) * time.Second)})
	}
	next, ok := s.nextRetry()
	c.Check(ok, gc.Equals, true)
	c.Check(next, gc.Equals, t0.Add(time.Second))

	s.due(t0)
	c.Check(drain(s), gc.HasLen, 0)
	s.due(t0.Add(2 * time.Second))
	c.Check(drain(s), gc.DeepEquals, []string{"c", "b"})
	next, _ = s.nextRetry()
	c.Check(next, gc.Equals, t0.Add(3*time.Second))
}

func (*scheduleSuite) TestEnqueueDropsRetry(c *gc.C) {
	s := newSchedule()
	s.retryAt("a", "", t0.Add(time.Minute))
	s.retryAt("b", "", t0.Add(time.Hour))
	s.retryAt("b", "", t0.Add(time.Second)) // rescheduled, not duplicated
	c.Check(s.retries, gc.HasLen, 2)
	next, _ := s.nextRetry()
	c.Check(next, gc.Equals, t0.Add(time.Second))

	s.enqueue("b", "")
	c.Check(s.retries, gc.HasLen, 1)
	next, _ = s.nextRetry()
	c.Check(next, gc.Equals, t0.Add(time.Minute))
	c.Check(drain(s), gc.DeepEquals, []string{"b"})
}

func (*scheduleSuite) TestWakeCapacity(c *gc.C) {
	s := newSchedule()
	for _, o := range []outcome{
		{id: "a", retryAt: t0.Add(time.Minute), waitingFor: "pool", waitingReason: domain.ReasonWaitingForCapacity},
		{id: "b", retryAt: t0.Add(time.Minute), waitingFor: "other", waitingReason: domain.ReasonWaitingForCapacity},
		{id: "c", retryAt: t0.Add(time.Minute), waitingFor: "pool", waitingReason: domain.ReasonQuotaExceeded},
		{id: "e", retryAt: t0.Add(time.Minute), waitingFor: "other", waitingReason: domain.ReasonBrokerUnavailable},
	} {
		s.enqueue(o.id, "")
		drain(s)
		s.finish(o)
	}
	s.enqueue("d", "")
	drain(s)
	s.finish(outcome{id: "d", freed: "pool"})

	woken := map[string]bool{}
	for {
		id, w, ok := s.start(100, 1)
		if !ok {
			break
		}
		woken[id] = w
	}
	c.Check(woken, gc.DeepEquals, map[string]bool{"a": true, "c": true})
	c.Check([]int{s.waitingForCapacity(), s.waitingForQuota(), s.waitingForBroker()}, gc.DeepEquals, []int{1, 0, 1})
	c.Check(s.entries["b"].waitingFor, gc.Equals, "other")
	c.Check(s.retries, gc.HasLen, 2)
}

// checkPlaces checks that each id is in the one place its entry says, that the counts
// agree with the entries, and that no field outlives the place it has a meaning in.
func checkPlaces(c *gc.C, s *schedule, step string) {
	inQueue := map[string]int{}
	for _, it := range s.queue.Peek(s.queue.Len()) {
		inQueue[it.ID]++
		c.Check(s.entries[it.ID] != nil && s.entries[it.ID].owner == it.Owner, gc.Equals, true, gc.Commentf("%s: %s queued under %q", step, it.ID, it.Owner))
	}
	inRetries := map[string]int{}
	for i, r := range s.retries {
		inRetries[r.id]++
		c.Check(r.index, gc.Equals, i, gc.Commentf("%s: retry of %s", step, r.id))
	}
	var want counts
	for id, e := range s.entries {
		comment := gc.Commentf("%s: %s %+v", step, id, *e)
		c.Check(inQueue[id], gc.Equals, btoi(e.place == queued), comment)
		c.Check(inRetries[id], gc.Equals, btoi(e.place == retrying), comment)
		c.Check(e.retry != nil, gc.Equals, e.place == retrying, comment)
		if e.retry != nil {
			c.Check(e.retry.id, gc.Equals, id, comment)
		}
		c.Check(e.dirty && e.place != running, gc.Equals, false, comment)
		c.Check(e.awaiting && e.place != running, gc.Equals, false, comment)
		c.Check(e.woken && e.place != queued, gc.Equals, false, comment)
		c.Check(e.waitingFor != "" && e.place == running, gc.Equals, false, comment)
		c.Check(e.place == idle && e.waitingFor == "", gc.Equals, false, gc.Commentf("%s: %s not forgotten", step, id))
		c.Check(e.counted, gc.Equals, e.counts(), comment)
		if e.place == running {
			want.inFlight++
			if e.awaiting {
				want.awaiting++
			}
		}
		switch {
		case e.waitingFor == "":
		case e.waitingReason == domain.ReasonQuotaExceeded:
			want.waitingForQuota++
		case e.waitingReason == domain.ReasonBrokerUnavailable:
			want.waitingForBroker++
		default:
			want.waitingForCapacity++
		}
	}
	for id := range inQueue {
		c.Check(s.entries[id], gc.NotNil, gc.Commentf("%s: %s queued without an entry", step, id))
	}
	for id := range inRetries {
		c.Check(s.entries[id], gc.NotNil, gc.Commentf("%s: %s retrying without an entry", step, id))
	}
	c.Check(s.counts, gc.Equals, want, gc.Commentf(step))
	c.Check([]int{s.inFlight(), s.awaitingReady(), s.waitingForCapacity(), s.waitingForQuota(), s.waitingForBroker(), s.queueDepth(), s.scheduledRetries()},
		gc.DeepEquals, []int{want.inFlight, want.awaiting, want.waitingForCapacity, want.waitingForQuota, want.waitingForBroker, s.queue.Len(), len(s.retries)},
		gc.Commentf("%s: in flight, awaiting, waiting for capacity, quota and broker, queued, retrying", step))
}

// TestOnePlaceAcrossTransitions drives the schedule through every operation from every place,
// in a long pseudo-random sequence, and checks after each step that every id is in at most
// one place and never runs twice at once.
func (*scheduleSuite) TestOnePlaceAcrossTransitions(c *gc.C) {
	ids := []string{"a", "b", "c", "d"}
	ownerOf := map[string]string{"a": "x", "b": "x", "c": "y", "d": ""}
	provisioners := []string{"", "pool", "other"}
	rng := rand.New(rand.NewPCG(1, 2))
	s := newSchedule()
	inFlight := map[string]bool{}
	now := t0
	seen := map[[2]place]bool{} // (place before, place after) of the id a step touched
	placeOf := func(id string) place {
		if e, ok := s.entries[id]; ok {
			return e.place
		}
		return idle
	}
	for i := range 5000 {
		id := ids[rng.IntN(len(ids))]
		before := placeOf(id)
		var step string
		switch rng.IntN(7) {
		case 0, 1:
			step = "enqueue " + id
			s.enqueue(id, ownerOf[id])
		case 2:
			queuedBefore := s.queue.Len()
			started, _, ok := s.start(2, 1)
			step = "start " + started
			busy, waiting := len(inFlight), 0
			for id := range inFlight {
				waiting += btoi(s.entries[id].awaiting)
			}
			full := busy-waiting >= 2 || busy >= 3
			c.Assert(ok, gc.Equals, queuedBefore > 0 && !full,
				gc.Commentf("step %d: start with %d queued, %d in flight, %d of them awaiting", i, queuedBefore, busy, waiting))
			if ok {
				c.Assert(inFlight[started], gc.Equals, false, gc.Commentf("step %d: %s started twice", i, started))
				inFlight[started] = true
				id, before = started, queued
			}
		case 3:
			step = "await " + id
			s.await(id)
		case 4:
			if !inFlight[id] {
				continue
			}
			o := outcome{id: id, requeue: rng.IntN(4) == 0, waitingFor: provisioners[rng.IntN(len(provisioners))],
				waitingReason: domain.WaitingReasons[rng.IntN(len(domain.WaitingReasons))], freed: provisioners[rng.IntN(len(provisioners))]}
			if rng.IntN(2) == 0 {
				o.retryAt = now.Add(time.Duration(rng.IntN(10)) * time.Second)
			}
			step = "finish " + id
			delete(inFlight, id)
			s.finish(o)
		case 5:
			step = "retryAt " + id
			s.retryAt(id, ownerOf[id], now.Add(time.Duration(rng.IntN(10))*time.Second))
		case 6:
			now = now.Add(time.Duration(rng.IntN(5)) * time.Second)
			step = "due"
			s.due(now)
		}
		seen[[2]place{before, placeOf(id)}] = true
		checkPlaces(c, s, step)
		for id := range inFlight {
			c.Assert(placeOf(id), gc.Equals, running, gc.Commentf("step %d: %s in flight", i, id))
		}
		if c.Failed() {
			c.Fatalf("step %d (%s) broke the schedule", i, step)
		}
	}
	for _, t := range [][2]place{
		{idle, queued}, {idle, retrying}, {queued, running}, {running, running},
		{running, idle}, {running, queued}, {running, retrying},
		{retrying, retrying}, {retrying, queued}, {queued, queued},
	} {
		c.Check(seen[t], gc.Equals, true, gc.Commentf("transition %v not exercised", t))
	}
}

// BenchmarkScheduleTurn measures what the loop asks of the schedule on each turn (an event
// in, reconciles started up to the limits, one outcome applied, the counts read for the
// report and metrics) while a backlog of resources retries as they wait for capacity.
func BenchmarkScheduleTurn(b *testing.B) {
	const backlog, busy, limit = 10000, 64, 16
	s := newSchedule()
	for i := range backlog {
		id := fmt.Sprintf("waiting-%d", i)
		s.enqueue(id, "")
		s.start(backlog, 1)
		s.finish(outcome{id: id, retryAt: t0.Add(time.Hour), waitingFor: "pool"})
	}
	ids := make([]string, busy)
	for i := range ids {
		ids[i] = fmt.Sprintf("busy-%d", i)
	}
	var inFlight []string
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.enqueue(ids[i%busy], "")
		for {
			id, _, ok := s.start(limit, limit)
			if !ok {
				break
			}
			inFlight = append(inFlight, id)
		}
		if i%4 == 0 {
			s.await(inFlight[len(inFlight)-1])
		}
		s.finish(outcome{id: inFlight[0], retryAt: t0.Add(time.Minute)})
		inFlight = inFlight[1:]
		sink = s.queueDepth() + s.inFlight() + s.awaitingReady() + s.waitingForCapacity() + s.scheduledRetries()
	}
}

// sink keeps the benchmark's reads of the counts from being optimised away.
var sink int
