package provisioner_test

import (
	"errors"
	"time"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/provisioner"
)

// A broker failure opens its provisioner's breaker: a resource of that provisioner waits
// with BrokerUnavailable, keeping its status, without calling the broker, while another
// provisioner's resource is provisioned at once; at the next probe one attempt calls the
// broker, whose success closes the breaker, and everything goes on, each wait one event
// in its resource's history.
func (s *workerSuite) TestBreakerOpensWaitsAndCloses(c *gc.C) {
	kube := newFakeEnviron()
	s.set.Environs["kube"] = kube
	kube.script("reconcile", environ.Unavailable(errors.New("the server is currently unable to handle the request"),
		environ.UnavailableServer, "503 Service Unavailable from the API server", 0))
	cfg := s.config()
	cfg.Concurrency = 1
	cfg.Breakers = provisioner.BreakerConfig{
		Store: provisioner.NewFakeBreakerStore(s.clock),
		Settings: func(string) (domain.BreakerSettings, bool) {
			return domain.BreakerSettings{Failures: 1, Window: time.Minute, OpenFor: 10 * time.Second, MaxOpenFor: time.Minute}, true
		},
		Metrics: provisioner.NewFakeBreakerMetrics(),
	}
	s.state.add(domain.Resource{ID: "k1", Provisioner: "kube", Args: map[string]any{"slots": 1}})
	s.state.add(domain.Resource{ID: "k2", Provisioner: "kube", Args: map[string]any{"slots": 1}})
	s.state.add(domain.Resource{ID: "p1", Args: map[string]any{"slots": 1}})
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	waiting := func(r *domain.Resource) bool { return r.Reason == domain.ReasonBrokerUnavailable }
	s.watcher.send(c, "k1")
	k1 := s.state.waitRow(c, "k1", "waiting for the broker", waiting)
	s.state.waitIdle(c, "k1", 1)
	c.Check(k1.Status, gc.Equals, domain.StatusProvisioning) // it had begun
	c.Check(k1.StatusMessage, gc.Equals, "broker unavailable: 503 Service Unavailable from the API server, 1 failures in 1m0s; next probe at 2025-03-01T12:00:10Z")
	c.Check(k1.Attempts, gc.Equals, 0)

	s.watcher.send(c, "k2", "p1")
	k2 := s.state.waitRow(c, "k2", "waiting for the broker", waiting)
	c.Check(k2.Status, gc.Equals, domain.StatusPending) // pending stays pending
	c.Check(k2.Attempts, gc.Equals, 0)
	s.state.waitRow(c, "p1", "ready", ready(1))
	s.state.waitIdle(c, "k2", 1)
	c.Check(kube.callCount("reconcile"), gc.Equals, 1) // k2 did not call the broker
	waitReport(c, w, "waiting-for-broker", 2)
	waitReport(c, w, "waiting-for-capacity", 0)

	c.Assert(s.clock.WaitAdvance(10*time.Second, testkit.LongWait, 1), gc.IsNil)
	s.state.waitRow(c, "k1", "ready", ready(1))
	s.state.waitRow(c, "k2", "ready", ready(1))
	c.Check(kube.callCount("reconcile"), gc.Equals, 3)
	waitReport(c, w, "waiting-for-broker", 0)
	for _, id := range []string{"k1", "k2"} {
		n := 0
		for _, u := range s.state.progress(id) {
			if u.Reason == domain.ReasonBrokerUnavailable {
				n++
			}
		}
		c.Check(n, gc.Equals, 1, gc.Commentf("%s waited with %d records", id, n))
	}
	c.Check(w.(interface{ Report() map[string]any }).Report()["breakers"], gc.DeepEquals,
		map[string]any{"kube": map[string]any{"state": "closed", "failures": 0, "last-error": "503 Service Unavailable from the API server"}})
}
