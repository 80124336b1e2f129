package provisioner

import (
	"time"

	gc "gopkg.in/check.v1"
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
		s.enqueue(id)
	}
	c.Check(drain(s), gc.DeepEquals, []string{"a", "b", "c"})
}

func (*scheduleSuite) TestLimit(c *gc.C) {
	s := newSchedule()
	s.enqueue("a")
	s.enqueue("b")
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
	s.enqueue("a")
	drain(s)
	s.enqueue("a")
	c.Check(drain(s), gc.HasLen, 0) // not twice at once
	s.finish(outcome{id: "a", retryAt: t0})
	c.Check(drain(s), gc.DeepEquals, []string{"a"}) // dirty wins over the retry
	c.Check(s.retries, gc.HasLen, 0)
}

func (*scheduleSuite) TestRetriesEarliestFirst(c *gc.C) {
	s := newSchedule()
	for i, id := range []string{"a", "b", "c"} {
		s.enqueue(id)
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
	s.retryAt("a", t0.Add(time.Minute))
	s.retryAt("b", t0.Add(time.Hour))
	s.retryAt("b", t0.Add(time.Second)) // rescheduled, not duplicated
	c.Check(s.retries, gc.HasLen, 2)
	next, _ := s.nextRetry()
	c.Check(next, gc.Equals, t0.Add(time.Second))

	s.enqueue("b")
	c.Check(s.retries, gc.HasLen, 1)
	next, _ = s.nextRetry()
	c.Check(next, gc.Equals, t0.Add(time.Minute))
	c.Check(drain(s), gc.DeepEquals, []string{"b"})
}

func (*scheduleSuite) TestWakeCapacity(c *gc.C) {
	s := newSchedule()
	for _, o := range []outcome{
		{id: "a", retryAt: t0.Add(time.Minute), waitingFor: "pool"},
		{id: "b", retryAt: t0.Add(time.Minute), waitingFor: "other"},
		{id: "c", retryAt: t0.Add(time.Minute), waitingFor: "pool"},
	} {
		s.enqueue(o.id)
		drain(s)
		s.finish(o)
	}
	s.enqueue("d")
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
	c.Check(s.capacity, gc.DeepEquals, map[string]string{"b": "other"})
	c.Check(s.retries, gc.HasLen, 1)
}
