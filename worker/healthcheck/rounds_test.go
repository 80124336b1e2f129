package healthcheck_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/internal/testkit"
)

// recordingEnviron passes every resource check at once and keeps each one's id and time, as
// many as there are.
type recordingEnviron struct {
	environtest.Environ

	mu    sync.Mutex
	calls []call
}

func newRecordingEnviron(clk clock.Clock) *recordingEnviron {
	e := &recordingEnviron{}
	e.CheckResourceFn = func(_ context.Context, r *environ.Resource, _ *environ.ResourceOptions) (*environ.Resource, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.calls = append(e.calls, call{id: r.ID, at: clk.Now()})
		return environtest.Unchanged(r), nil
	}
	return e
}

// checked returns the calls so far from the from-th on.
func (e *recordingEnviron) checked(from int) []call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls[from:])
}

// ids are the calls' ids, sorted.
func ids(calls []call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.id
	}
	slices.Sort(out)
	return out
}

// A round checks the resources there were when it started within its interval, however many
// are created meanwhile: those wait for the next round. Resources that become checkable
// during the round without being new (here: more than the round counted at its start) are
// checked within the interval too, at a faster pace.
func (s *workerSuite) TestARoundEndsWithinItsIntervalWhateverIsCreatedMeanwhile(c *gc.C) {
	env := newRecordingEnviron(s.clock)
	s.environs.envs["pool"] = env
	before := s.t0.Add(-time.Hour)
	for _, id := range []string{"r10", "r20", "r30", "r40"} {
		s.store.addCreated(id, "pool", before)
	}
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// Four resources counted: r10 is due at once, the next 15s later.
	s.metrics.wait(c, "resource", 1)
	c.Assert(s.clock.WaitAdvance(time.Second, testkit.LongWait, 1), gc.IsNil)
	// 1,000 runtimes are created during the round, among the ids the round has still to read.
	created := s.clock.Now()
	var later []string
	for i := range 1000 {
		id := fmt.Sprintf("r%02d-%03d", 30+i%20, i)
		s.store.addCreated(id, "pool", created)
		later = append(later, id)
	}
	// Six older ones, not counted at the start, turn up as well.
	extra := []string{"r35", "r36", "r37", "r45", "r46", "r47"}
	for _, id := range extra {
		s.store.addCreated(id, "pool", before)
	}
	round1 := append([]string{"r10", "r20", "r30", "r40"}, extra...)
	slices.Sort(round1)

	// Every check of the round is due before the interval ends.
	c.Assert(s.clock.WaitAdvance(59*time.Second-time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	s.metrics.wait(c, "resource", len(round1))
	first := env.checked(0)
	c.Check(ids(first), gc.DeepEquals, round1)
	for _, call := range first {
		c.Check(call.at.Before(s.t0.Add(time.Minute)), gc.Equals, true, gc.Commentf("%s checked at %s", call.id, call.at))
	}
	waitReport(c, w.(reporter), map[string]any{"round-started": s.t0, "round-checked": len(round1), "round-deferred": 1000})

	// The next round starts when the interval ends and checks all of them within its own.
	c.Assert(s.clock.WaitAdvance(time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	waitReport(c, w.(reporter), map[string]any{"round-started": s.t0.Add(time.Minute)})
	all := append(slices.Clone(round1), later...)
	slices.Sort(all)
	c.Assert(s.clock.WaitAdvance(time.Minute-time.Nanosecond, testkit.LongWait, 1), gc.IsNil)
	s.metrics.wait(c, "resource", len(round1)+len(all))
	second := env.checked(len(first))
	c.Check(ids(second), gc.DeepEquals, all)
	for _, call := range second {
		if call.at.Before(s.t0.Add(time.Minute)) || !call.at.Before(s.t0.Add(2*time.Minute)) {
			c.Errorf("%s checked at %s, outside the second round's interval", call.id, call.at)
		}
	}
	waitReport(c, w.(reporter), map[string]any{"round-started": s.t0.Add(time.Minute), "round-checked": len(all), "round-deferred": 0})
	last := waitLastRound(c, w, len(round1))
	c.Check(last["started"], gc.Equals, s.t0)
	c.Check(last["deferred"], gc.Equals, 1000)
}

// Environ checks keep their own schedule: a round held up by a check that does not return
// delays none of them.
func (s *workerSuite) TestALongRoundRunsPastItsIntervalAndSaysSo(c *gc.C) {
	s.store.add("r1")
	s.store.add("r2")
	s.env.block = true
	s.config.Concurrency = 1
	logs := newLogCapture()
	s.config.Logger = slog.New(logs)
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// At the start: r1's check, which hangs.
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0})
	for range 3 {
		// r1's check timeout is the only timer: the round waits for a free check.
		c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	}
	report := waitReportFunc(c, w, "the round still at its start", func(report map[string]any) bool {
		return report["round-started"] == s.t0
	})
	c.Check(report["round-checked"], gc.Equals, 0)

	// r1's check returns at last; r2, long due, is checked at once, and the next round starts
	// as soon as the late one has read its last page.
	s.env.gate.Release()
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r2", at: s.t0.Add(3 * time.Minute)})
	s.env.gate.Release()
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0.Add(3 * time.Minute)})
	s.env.gate.Release()
	waitReport(c, w.(reporter), map[string]any{"round-started": s.t0.Add(3 * time.Minute), "round-checked": 1})
	last := waitLastRound(c, w, 2)
	c.Check(last["started"], gc.Equals, s.t0)
	logs.waitCount(c, "health-check round ran past its interval: its last checks were late; raise the concurrency or the interval", 1)
}

// A check is counted in the round that started it, also when it ends in the next one.
func (s *workerSuite) TestALateCheckCountsInItsOwnRound(c *gc.C) {
	s.store.add("r1")
	s.env.block = true
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0})
	// The loop's timer (the end of the round) and the check's timeout.
	c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 2), gc.IsNil)
	// The next round finds r1 still locked by the first round's check.
	waitReport(c, w.(reporter), map[string]any{"round-started": s.t0.Add(time.Minute), "round-skipped": 1})

	s.env.gate.Release()
	last := waitLastRound(c, w, 1)
	c.Check(last["started"], gc.Equals, s.t0)
	c.Check(w.(worker.Reporter).Report()["round-checked"], gc.Equals, 0)
}

// waitReportFunc waits until the worker's report satisfies pred, and returns it.
func waitReportFunc(c *gc.C, w worker.Worker, what string, pred func(map[string]any) bool) map[string]any {
	var report map[string]any
	testkit.Eventually(c, func() error {
		if report = w.(worker.Reporter).Report(); !pred(report) {
			return fmt.Errorf("report %v never showed %s", report, what)
		}
		return nil
	})
	return report
}

// waitLastRound waits until the report's last round has checked resources, and returns it.
func waitLastRound(c *gc.C, w worker.Worker, checked int) map[string]any {
	report := waitReportFunc(c, w, fmt.Sprintf("a last round of %d checks", checked), func(report map[string]any) bool {
		last, _ := report["last-round"].(map[string]any)
		return last != nil && last["checked"] == checked
	})
	return report["last-round"].(map[string]any)
}
