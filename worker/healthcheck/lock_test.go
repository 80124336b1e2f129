package healthcheck_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/healthcheck"
)

type reporter interface{ Report() map[string]any }

// waitReport waits until the worker's report has every value of want; the loop counts a
// check's end after the check reports it elsewhere.
func waitReport(c *gc.C, w reporter, want map[string]any) {
	testkit.Eventually(c, func() error {
		report := w.Report()
		for k, v := range want {
			if report[k] != v {
				return fmt.Errorf("report %v never had %v", report, want)
			}
		}
		return nil
	})
}

// A resource the provisioner is reconciling (it holds the resource's lock) is skipped this
// round, not counted, and checked the next round once the reconcile is over.
func (s *workerSuite) TestSkipsAResourceBeingReconciled(c *gc.C) {
	s.store.add("r1")
	s.store.add("r2")
	logs := newLogCapture()
	s.config.Logger = slog.New(logs)
	reconciling, ok := s.locks.TryLock("r1")
	c.Assert(ok, gc.Equals, true)
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// r1 is due at once (two resources: 30s slots), r2 30s later.
	logs.waitCount(c, "resource is being reconciled; skipping its check this round", 1)
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r2", at: s.t0.Add(30 * time.Second)})
	c.Check(s.metrics.wait(c, "resource", 1), gc.DeepEquals, []observation{{"resource", "pool", healthcheck.ResultHealthy}})
	waitReport(c, w.(reporter), map[string]any{"round-checked": 1, "round-skipped": 1})

	// The reconcile ends; the next round checks r1 at its start.
	reconciling()
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0.Add(time.Minute)})
	c.Check(s.metrics.wait(c, "resource", 2), gc.HasLen, 2)
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	c.Check(s.metrics.seen, gc.HasLen, 2)
}

// A check holds the resource's lock from before CheckResource until its outcome is recorded:
// a reconcile (here the test, locking as the provisioner does) waits for it, and finds the
// outcome recorded when it gets the lock.
func (s *workerSuite) TestAReconcileWaitsForTheCheckInFlight(c *gc.C) {
	s.store.add("r1")
	s.env.block = true
	s.env.errs["r1"] = errors.New("host a is down")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0})
	_, ok := s.locks.TryLock("r1")
	c.Check(ok, gc.Equals, false)

	type locked struct {
		unlock  func()
		records []domain.HealthUpdate
		err     error
	}
	got := make(chan locked, 1)
	go func() {
		unlock, err := s.locks.Lock(context.Background(), "r1")
		s.store.mu.Lock()
		records := append([]domain.HealthUpdate(nil), s.store.records...)
		s.store.mu.Unlock()
		got <- locked{unlock, records, err}
	}()
	select {
	case l := <-got:
		c.Fatalf("the reconcile got the lock while the check was in flight (%d records)", len(l.records))
	default:
	}
	s.env.gate.Release()
	select {
	case l := <-got:
		c.Assert(l.err, gc.IsNil)
		c.Assert(l.records, gc.HasLen, 1)
		c.Check(l.records[0].Status, gc.Equals, domain.StatusUnhealthy)
		l.unlock()
	case <-time.After(testkit.LongWait):
		c.Fatalf("the reconcile is still waiting after the check ended")
	}
	c.Check(s.store.row("r1").Status, gc.Equals, domain.StatusUnhealthy)
}
