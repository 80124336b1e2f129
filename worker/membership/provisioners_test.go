package membership_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/worker/membership"
)

// provisionerNames stands in for the agent's provisioner set, which a reload changes.
type provisionerNames struct {
	mu    sync.Mutex
	names []string
}

func (p *provisionerNames) get() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.names...)
}

func (p *provisionerNames) set(names ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = names
}

func (s *workerSuite) TestRecordsTheProvisionersAtRegistrationAndWhenTheyChange(c *gc.C) {
	names := &provisionerNames{names: []string{"static", "kube"}}
	s.config.Provisioners = names.get
	w, err := s.startWithProvisioners(c)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Check(w.Report()["provisioners"], gc.DeepEquals, []string{"kube", "static"})

	// Unchanged: the heartbeat records nothing more.
	s.tick(c)
	s.expect(c, "heartbeat")
	s.expect(c, "list")
	s.expectLive(c, 2)

	// A reload: the next heartbeat records the new set.
	names.set("static")
	s.tick(c)
	s.expect(c, "heartbeat")
	got := s.expect(c, "provisioners")
	c.Check(got.names, gc.DeepEquals, []string{"static"})
	c.Check(got.session, gc.Equals, int64(7))
	s.expect(c, "list")
	s.expectLive(c, 2)
}

func (s *workerSuite) TestAFailedRecordOfTheProvisionersIsTriedAgain(c *gc.C) {
	names := &provisionerNames{names: []string{"static"}}
	s.config.Provisioners = names.get
	fail := true
	var mu sync.Mutex
	s.store.provisioners = func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return errors.New("connection reset")
		}
		return nil
	}
	w, err := s.startWithProvisioners(c)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Check(strings.Contains(s.logs.String(), "recording the agent's provisioners failed"), gc.Equals, true)

	s.tick(c)
	s.expect(c, "heartbeat")
	c.Check(s.expect(c, "provisioners").names, gc.DeepEquals, []string{"static"})
	s.expect(c, "list")
	s.expectLive(c, 2)
	c.Check(w.Report()["provisioners"], gc.DeepEquals, []string{"static"})
}

// startWithProvisioners starts the worker and takes its registration, its record of the
// provisioners and its first prune.
func (s *workerSuite) startWithProvisioners(c *gc.C) (reportingWorker, error) {
	w, err := membership.NewWorker(s.config)
	if err != nil {
		return nil, err
	}
	s.expect(c, "register")
	c.Check(s.expect(c, "provisioners").names, gc.DeepEquals, sortedCopy(s.config.Provisioners()))
	s.expect(c, "list")
	s.expectLive(c, 2)
	s.expect(c, "prune")
	return w.(reportingWorker), nil
}

func sortedCopy(names []string) []string {
	return slices.Sorted(slices.Values(names))
}
