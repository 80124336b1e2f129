package healthcheck_test

import (
	"fmt"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
)

// A resource paused while its check runs is found so by the environ before it repairs
// anything (its error wraps domain.ErrStale): the check records nothing, and is not counted.
func (s *workerSuite) TestPausedWhileCheckedRecordsNothing(c *gc.C) {
	s.store.add("r1")
	s.env.block = true
	s.env.errs["r1"] = fmt.Errorf("runtime r1 was paused while checked; nothing repaired (%w)", domain.ErrStale)
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.env.calls.Next(c)
	s.store.mu.Lock()
	s.store.rows["r1"].Paused = true
	s.store.mu.Unlock()
	s.env.gate.Release()

	waitReport(c, w.(reporter), map[string]any{"round-skipped": 1})
	c.Check(s.store.records, gc.HasLen, 0)
	r := s.store.row("r1")
	c.Check(r.Status, gc.Equals, domain.StatusReady)
	c.Check(r.StatusMessage, gc.Equals, "ready at generation 1")
	c.Check(s.metrics.observations(), gc.HasLen, 0)
	workertest.CheckAlive(c, w)
}

// The environ sees the resource's labels.
func (s *workerSuite) TestChecksCarryTheLabels(c *gc.C) {
	s.store.add("r1")
	s.store.mu.Lock()
	s.store.rows["r1"].Labels = map[string]string{"team": "data"}
	s.store.mu.Unlock()
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.env.calls.Next(c)
	s.env.mu.Lock()
	defer s.env.mu.Unlock()
	c.Check(s.env.labels, gc.DeepEquals, []map[string]string{{"team": "data"}})
}

// The environ is told the row as the check read it, which its repairs carry to the store.
func (s *workerSuite) TestChecksCarryTheRowAsRead(c *gc.C) {
	s.store.add("r1")
	s.store.mu.Lock()
	s.store.rows["r1"].LeaseToken = 4
	s.store.mu.Unlock()
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.env.calls.Next(c)
	s.env.mu.Lock()
	defer s.env.mu.Unlock()
	c.Assert(s.env.checked, gc.HasLen, 1)
	c.Check(*s.env.checked[0], gc.Equals, domain.Checked{Holder: s.config.Agent.ID, Generation: 1, LeaseToken: 4})
}

// A repair the store refused because the row is gone (deleted while it was checked) records
// nothing, and is not counted.
func (s *workerSuite) TestRepairOfAGoneRowRecordsNothing(c *gc.C) {
	s.store.add("r1")
	s.env.errs["r1"] = fmt.Errorf("slot reservation was missing and could not be made again: %w", domain.ErrNotFound)
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.env.calls.Next(c)

	waitReport(c, w.(reporter), map[string]any{"round-skipped": 1})
	c.Check(s.store.records, gc.HasLen, 0)
	c.Check(s.metrics.observations(), gc.HasLen, 0)
	workertest.CheckAlive(c, w)
}
