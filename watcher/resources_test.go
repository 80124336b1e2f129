package watcher_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/watcher"
)

const (
	// shortWait is how long the test gives something it expects not to happen.
	shortWait = 50 * time.Millisecond
)

type resourcesSuite struct {
	source *fakeSource
	clock  *testclock.Clock
	config watcher.ResourcesConfig
}

var _ = gc.Suite(&resourcesSuite{})

func (s *resourcesSuite) SetUpTest(c *gc.C) {
	s.source = newFakeSource()
	s.clock = testclock.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s.config = watcher.ResourcesConfig{
		Source: s.source,
		Clock:  s.clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ResourcesSettings: watcher.ResourcesSettings{
			PollInterval: time.Minute,
			OverdueAfter: 15 * time.Second,
			GapTimeout:   30 * time.Second,
			BatchSize:    3,
			EventSize:    3,
			ReadAhead:    100,

			OwnerPoliciesInterval: time.Minute,
		},
	}
}

func (s *resourcesSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*watcher.ResourcesConfig)
		field  string
	}{
		{func(cfg *watcher.ResourcesConfig) { cfg.Source = nil }, "Source .*agent's store"},
		{func(cfg *watcher.ResourcesConfig) { cfg.Clock = nil }, "Clock"},
		{func(cfg *watcher.ResourcesConfig) { cfg.Logger = nil }, "Logger"},
		{func(cfg *watcher.ResourcesConfig) { cfg.PollInterval = 0 }, "PollInterval 0s .*positive"},
		{func(cfg *watcher.ResourcesConfig) { cfg.OverdueAfter = 0 }, "OverdueAfter 0s .*--agent-ttl"},
		{func(cfg *watcher.ResourcesConfig) { cfg.GapTimeout = -time.Second }, "GapTimeout -1s .*positive"},
		{func(cfg *watcher.ResourcesConfig) { cfg.BatchSize = 0 }, "BatchSize 0 .*at least 1"},
		{func(cfg *watcher.ResourcesConfig) { cfg.EventSize = 0 }, "EventSize 0 .*at least 1"},
		{func(cfg *watcher.ResourcesConfig) { cfg.ReadAhead = 2 }, "ReadAhead 2 .*at least BatchSize"},
		{func(cfg *watcher.ResourcesConfig) { cfg.OwnerPoliciesInterval = 0 }, "OwnerPoliciesInterval 0s .*positive"},
	} {
		config := s.config
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := watcher.NewResourcesWatcher(config)
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.config.Validate(), gc.IsNil)
}

func (s *resourcesSuite) TestInitialEventIsEveryResourceNeedingAttention(c *gc.C) {
	s.source.commit("old")
	s.source.setAttention("r1", "r2")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"r1", "r2"})
}

func (s *resourcesSuite) TestInitialEventIsSentWhenEmpty(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	event := nextEvent(c, w)
	c.Check(event, gc.NotNil)
	c.Check(event, gc.HasLen, 0)
}

func (s *resourcesSuite) TestChangesDelivered(c *gc.C) {
	s.source.commit("before-start")
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)

	// Three entries fill a batch, so the watcher has to read again to find out it has all.
	s.source.commit("a", "b", "a")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a", "b"})

	// An event holds at most EventSize ids.
	s.source.commit("c", "d", "e", "f", "g", "h", "i")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"c", "d", "e"})
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"f", "g", "h"})
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"i"})
	assertNoEvent(c, w)
}

func (s *resourcesSuite) TestCoalescesWhileConsumerIsSlow(c *gc.C) {
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)

	seq := s.source.commit("a", "b")
	s.source.notify()
	s.waitRead(c, seq)
	seq = s.source.commit("c", "a")
	s.source.notify()
	s.waitRead(c, seq)
	s.sync(c)
	c.Check(report(w)["pending"], gc.Equals, 3)

	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a", "b", "c"})
}

func (s *resourcesSuite) TestGapFilledLaterIsDelivered(c *gc.C) {
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)

	// "a" takes its sequence number first but commits after "b".
	slow := s.source.reserve()
	s.source.commit("b")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"b"})
	c.Check(report(w)["gaps"], gc.Equals, 1)

	s.source.commitReserved(slow, "a")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a"})
	c.Check(report(w)["gaps"], gc.Equals, 0)
}

func (s *resourcesSuite) TestGapForgottenAfterGapTimeout(c *gc.C) {
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)

	rolledBack := s.source.reserve()
	s.source.commit("b")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"b"})
	c.Check(report(w)["gaps"], gc.Equals, 1)

	// The poll timer (a minute) does not fire; the next read happens on a wake-up.
	s.clock.Advance(s.config.GapTimeout)
	s.source.commit("c")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"c"})
	c.Check(report(w)["gaps"], gc.Equals, 0)

	// Had the gap still been watched, this read would have found "late".
	s.source.commitReserved(rolledBack, "late")
	s.source.commit("d")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"d"})
}

func (s *resourcesSuite) TestGapBelowStartCursorIsWatched(c *gc.C) {
	s.source.commit("x")
	open := s.source.reserve()
	s.source.commit("y")
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)
	c.Check(report(w)["gaps"], gc.Equals, 1)

	s.source.commitReserved(open, "late")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"late"})
}

// A transaction that writes many log entries (a bulk insert) takes their numbers one by
// one; another that commits first with a number among them must not cost the watcher the
// bulk insert's older entries, however many more than a page they are.
func (s *resourcesSuite) TestLongRunSkippedByAnEarlierCommitIsDeliveredWhole(c *gc.C) {
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)

	var bulk []int64
	for range 10 {
		bulk = append(bulk, s.source.reserve())
	}
	s.source.commit("small")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"small"})
	c.Check(report(w)["gaps"], gc.Equals, 10)

	var want []string
	for i, seq := range bulk {
		id := fmt.Sprintf("bulk-%d", i)
		s.source.commitReserved(seq, id)
		want = append(want, id)
	}
	s.source.notify()
	slices.Sort(want)
	c.Check(eventsOf(c, w, len(want)), gc.DeepEquals, want)
	c.Check(report(w)["gaps"], gc.Equals, 0)
}

// A run of missing numbers is remembered by its newest ReadAhead numbers only: a bound on
// the watcher's memory and on its lookups, far above what one transaction holds open.
func (s *resourcesSuite) TestLongRunOfMissingSeqsIsBounded(c *gc.C) {
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)

	for range s.config.ReadAhead + 10 {
		s.source.reserve()
	}
	s.source.commit("a")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a"})
	c.Check(report(w)["gaps"], gc.Equals, s.config.ReadAhead)
}

func (s *resourcesSuite) TestPollsWithoutWakeups(c *gc.C) {
	s.source.listenHangs = true
	w, err := watcher.NewResourcesWatcher(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	s.source.commit("a")
	assertNoEvent(c, w)
	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a"})

	s.source.commit("b")
	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"b"})
	c.Check(report(w)["listening"], gc.Equals, false)
}

func (s *resourcesSuite) TestListenerFailuresAreRetriedWithBackoff(c *gc.C) {
	s.config.PollInterval = time.Hour
	s.source.listenErrs = []error{errors.New("connection refused")}
	w, err := watcher.NewResourcesWatcher(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	// The poll timer and the one-second backoff.
	c.Assert(s.clock.WaitAdvance(time.Second, testkit.LongWait, 2), gc.IsNil)
	first := s.waitListener(c)
	first.fail <- errors.New("connection reset")
	select {
	case <-first.closed:
	case <-time.After(testkit.LongWait):
		c.Fatalf("broken listener was not closed")
	}

	// A second failure in a row doubles the backoff: one second is not enough.
	c.Assert(s.clock.WaitAdvance(time.Second, testkit.LongWait, 2), gc.IsNil)
	select {
	case <-s.source.listens:
		c.Fatalf("listened again before the backoff ran out")
	case <-time.After(shortWait):
	}
	c.Assert(s.clock.WaitAdvance(time.Second, testkit.LongWait, 2), gc.IsNil)
	s.waitListener(c)

	s.source.commit("a")
	s.source.notify()
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a"})
}

func (s *resourcesSuite) TestReadFailureKillsWatcher(c *gc.C) {
	w := s.startListening(c)
	defer workertest.DirtyKill(c, w)

	s.source.setReadErr(errors.New("connection lost"))
	s.source.notify()
	err := workertest.CheckKilled(c, w)
	c.Check(err, gc.ErrorMatches, `resources watcher: read the change log after entry 0: connection lost`)
}

func (s *resourcesSuite) TestStartFailureKillsWatcher(c *gc.C) {
	s.source.setReadErr(errors.New("connection lost"))
	w, err := watcher.NewResourcesWatcher(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.DirtyKill(c, w)

	err = workertest.CheckKilled(c, w)
	c.Check(err, gc.ErrorMatches, `resources watcher: read the newest change-log entry: connection lost`)
}

func (s *resourcesSuite) TestKillWithUndeliveredChanges(c *gc.C) {
	s.source.setAttention("a")
	w := s.start(c)
	workertest.CleanKill(c, w)
}

func (s *resourcesSuite) TestReport(c *gc.C) {
	s.source.commit("x")
	s.source.reserve()
	s.source.commit("y")
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)

	seq := s.source.commit("a", "b")
	s.source.notify()
	s.waitRead(c, seq)
	s.sync(c)
	c.Check(report(w), gc.DeepEquals, map[string]any{
		"cursor":         int64(5),
		"gaps":           1,
		"pending":        2,
		"pending-owners": 1,
		"queued-ahead":   0,
		"listening":      true,
	})
}

// start starts a watcher on the suite's config.
func (s *resourcesSuite) TestPollsReportTheResourcesOfDeadAgents(c *gc.C) {
	s.source.listenHangs = true
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	// An agent died holding two leases; no change is logged for them.
	s.source.setDeadLeased("orphan-1", "orphan-2")
	assertNoEvent(c, w)
	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"orphan-1", "orphan-2"})

	// Another agent took one over; the other is reported again, with a change that came in.
	s.source.setDeadLeased("orphan-2")
	s.source.commit("changed")
	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"changed", "orphan-2"})

	s.source.setDeadLeased()
	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	assertNoEvent(c, w)
}

func (s *resourcesSuite) TestResourcesNeedingAttentionAreReadAheadInPages(c *gc.C) {
	s.source.setAttention("a1", "a2", "a3", "a4", "a5", "a6", "a7")
	s.source.listenHangs = true
	s.config.ReadAhead = 4
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// The first event is the first page; the watcher reads on while it holds fewer than
	// ReadAhead (4) ids, a page of BatchSize (3) at a time, and delivers at most EventSize
	// (3) at once.
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a1", "a2", "a3"})
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a4", "a5", "a6"})
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a7"})
	s.source.commit("changed")
	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"changed"})
	assertNoEvent(c, w)
}

func (s *resourcesSuite) TestPollsReportOverdueRetries(c *gc.C) {
	s.source.listenHangs = true
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	// An agent released two resources with retries scheduled and never came back for them.
	s.source.setOverdue("left-1", "left-2", "left-3", "left-4")
	assertNoEvent(c, w)
	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"left-1", "left-2", "left-3"})
	s.source.mu.Lock()
	c.Check(s.source.overdueFor, gc.Equals, s.config.OverdueAfter)
	s.source.mu.Unlock()

	s.source.setOverdue("left-4")
	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"left-4"})

	s.source.setOverdue()
	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	assertNoEvent(c, w)
}

// Every GapTimeout, not every poll, the resources left quiet for GapTimeout are reported:
// their change-log entries may have been given up on as gaps.
func (s *resourcesSuite) TestReportsResourcesLeftQuietEveryGapTimeout(c *gc.C) {
	s.config.PollInterval = 10 * time.Second
	s.source.listenHangs = true
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(nextEvent(c, w), gc.HasLen, 0)

	// A client committed an insert whose change-log number the watcher gave up on.
	s.source.owners["stranded-1"] = "team-a"
	s.source.setQuiet("stranded-1", "stranded-2")
	for range 2 {
		c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
		assertNoEvent(c, w)
	}
	s.source.mu.Lock()
	c.Check(s.source.quietReads, gc.Equals, 0)
	s.source.mu.Unlock()

	c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	c.Check(nextOwnedEvent(c, w), gc.DeepEquals, []watcher.Owned{{ID: "stranded-1", Owner: "team-a"}, {ID: "stranded-2"}})
	s.source.mu.Lock()
	c.Check(s.source.quietReads, gc.Equals, 1)
	c.Check(s.source.quietFor, gc.Equals, s.config.GapTimeout)
	c.Check(s.source.quietLimit, gc.Equals, s.config.ReadAhead)
	s.source.mu.Unlock()

	s.source.setQuiet()
	for range 3 {
		c.Assert(s.clock.WaitAdvance(s.config.PollInterval, testkit.LongWait, 1), gc.IsNil)
	}
	assertNoEvent(c, w)
	s.source.mu.Lock()
	c.Check(s.source.quietReads, gc.Equals, 2)
	s.source.mu.Unlock()
}

// A late owner's change is delivered in the next batch while another owner's backlog,
// read ahead, waits: the owners take turns.
func (s *resourcesSuite) TestALateOwnersChangeIsDeliveredInTheNextBatch(c *gc.C) {
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)

	burst := []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10"}
	s.source.setOwner("alice", burst...)
	s.source.setOwner("bob", "b1")
	s.source.commit(burst...)
	s.source.notify()
	first := nextOwnedEvent(c, w)
	c.Check(ids(first), gc.DeepEquals, []string{"a1", "a2", "a3"})
	c.Check(first[0].Owner, gc.Equals, "alice")
	s.waitPending(c, w, 7)

	seq := s.source.commit("b1")
	s.source.notify()
	s.waitRead(c, seq)
	c.Check(nextOwnedEvent(c, w), gc.DeepEquals, []watcher.Owned{{"a4", "alice"}, {"b1", "bob"}, {"a5", "alice"}})
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a6", "a7", "a8"})
}

// A late owner's change that lands behind another owner's backlog the watcher has not read
// yet is read from the log's newest entries on the wake-up and delivered in the next batch,
// before the pages of the backlog; the backlog is still served in order, and the late
// change once only.
func (s *resourcesSuite) TestALateOwnersChangeBehindAnUnreadBacklogIsReadFromTheNewest(c *gc.C) {
	s.config.ReadAhead = s.config.BatchSize
	w := s.startListening(c)
	defer workertest.CleanKill(c, w)
	// The report is read from other goroutines (the agent's status) while the loop queues
	// entries ahead and skips them: under the race detector, a field it reads unguarded
	// fails this test.
	defer reportContinuously(w)()

	// More of alice's than one read of the newest entries looks at, so that hers are not
	// the first of her owner and wait for the pages.
	var burst []string
	for i := range 100 {
		burst = append(burst, fmt.Sprintf("a%03d", i))
	}
	s.source.setOwner("alice", burst...)
	s.source.setOwner("bob", "b1")
	s.source.commit(burst...)
	s.source.notify()
	s.waitPending(c, w, 3)
	c.Check(report(w)["cursor"], gc.Equals, int64(3))

	s.source.commit("b1")
	s.source.notify()
	s.waitPending(c, w, 4)
	c.Check(report(w)["queued-ahead"], gc.Equals, 1)
	c.Check(nextOwnedEvent(c, w), gc.DeepEquals, []watcher.Owned{{"a000", "alice"}, {"b1", "bob"}, {"a001", "alice"}})

	var rest []string
	for len(rest) < len(burst)-2 {
		rest = append(rest, nextEvent(c, w)...)
	}
	c.Check(rest, gc.DeepEquals, burst[2:])
	s.sync(c)
	assertNoEvent(c, w)
	c.Check(report(w)["queued-ahead"], gc.Equals, 0)
}

// The batches serve the owners in proportion to their weights, read at start.
func (s *resourcesSuite) TestBatchesFollowTheOwnersWeights(c *gc.C) {
	s.config.BatchSize, s.config.EventSize = 4, 4
	attention := []string{"a1", "a2", "a3", "a4", "a5", "a6", "b1", "b2", "b3"}
	s.source.setAttention(attention...)
	s.source.setOwner("alice", attention[:6]...)
	s.source.setOwner("bob", attention[6:]...)
	s.source.setPolicies(domain.OwnerPolicy{Owner: "alice", Weight: 3})
	s.source.listenHangs = true
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// Every page is read ahead before the first batch is taken: alice gives three ids a
	// turn, bob one.
	s.waitPending(c, w, 9)
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a1", "a2", "a3", "b1"})
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"a4", "a5", "a6", "b2"})
	c.Check(nextEvent(c, w), gc.DeepEquals, []string{"b3"})
}

// waitPending waits until the watcher holds n ids.
func (s *resourcesSuite) waitPending(c *gc.C, w watcher.OwnedWatcher, n int) {
	deadline := time.Now().Add(testkit.LongWait)
	for report(w)["pending"] != n {
		if time.Now().After(deadline) {
			c.Fatalf("pending %v, want %d", report(w)["pending"], n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *resourcesSuite) start(c *gc.C) watcher.OwnedWatcher {
	w, err := watcher.NewResourcesWatcher(s.config)
	c.Assert(err, gc.IsNil)
	return w
}

// startListening starts a watcher, takes its first event, and returns once its listener is
// open and the read that follows listening is done, so later reads are the test's own.
func (s *resourcesSuite) startListening(c *gc.C) watcher.OwnedWatcher {
	w := s.start(c)
	nextEvent(c, w)
	s.waitListener(c)
	// The first read is the start's look below the cursor; then the read after listening
	// runs until a short batch.
	s.nextRead(c)
	for len(s.nextRead(c)) == s.config.BatchSize {
	}
	return w
}

func (s *resourcesSuite) waitListener(c *gc.C) *fakeListener {
	select {
	case l := <-s.source.listens:
		return l
	case <-time.After(testkit.LongWait):
		c.Fatalf("watcher did not listen for wake-ups")
		return nil
	}
}

func (s *resourcesSuite) nextRead(c *gc.C) []int64 {
	select {
	case changes := <-s.source.reads:
		seqs := make([]int64, len(changes))
		for i, change := range changes {
			seqs[i] = change.Seq
		}
		return seqs
	case <-time.After(testkit.LongWait):
		c.Fatalf("watcher did not read the change log")
		return nil
	}
}

// waitRead waits for a read of the change log that returns seq.
func (s *resourcesSuite) waitRead(c *gc.C, seq int64) {
	for {
		for _, got := range s.nextRead(c) {
			if got == seq {
				return
			}
		}
	}
}

// sync returns once the watcher has finished every read it started before: it wakes the
// watcher and waits for the read that follows, which the loop only starts after the others.
func (s *resourcesSuite) sync(c *gc.C) {
	s.source.notify()
	s.nextRead(c)
}

func nextEvent(c *gc.C, w watcher.OwnedWatcher) []string {
	return ids(nextOwnedEvent(c, w))
}

// eventsOf takes events until they hold n ids, and returns those ids in order.
func eventsOf(c *gc.C, w watcher.OwnedWatcher, n int) []string {
	var got []string
	for len(got) < n {
		got = append(got, nextEvent(c, w)...)
	}
	slices.Sort(got)
	return got
}

func nextOwnedEvent(c *gc.C, w watcher.OwnedWatcher) []watcher.Owned {
	select {
	case batch := <-w.Changes():
		return batch
	case <-time.After(testkit.LongWait):
		c.Fatalf("no event from the watcher")
		return nil
	}
}

func assertNoEvent(c *gc.C, w watcher.OwnedWatcher) {
	select {
	case batch := <-w.Changes():
		c.Fatalf("unexpected event %v", batch)
	case <-time.After(shortWait):
	}
}

func report(w watcher.OwnedWatcher) map[string]any {
	return w.(worker.Reporter).Report()
}

// reportContinuously reads w's report over and over from another goroutine, as the agent's
// status may, until the function it returns is called.
func reportContinuously(w watcher.OwnedWatcher) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Microsecond):
				report(w)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// ids returns the ids of batch, in order.
func ids(batch []watcher.Owned) []string {
	out := make([]string, len(batch))
	for i, o := range batch {
		out[i] = o.ID
	}
	return out
}
