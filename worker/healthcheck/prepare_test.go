package healthcheck_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/internal/testkit"
)

// preparingEnviron is a fakeEnviron that prepares checks a page at a time, failing with
// prepareErr when there is one, and records which checks went through what it prepared.
type preparingEnviron struct {
	environtest.CheckPreparer

	mu         sync.Mutex
	pages      [][]string
	preparedAt []time.Time
	prepared   []string // ids checked through prepared checks
}

func newPreparingEnviron(env *fakeEnviron, clk clock.Clock, prepareErr error) *preparingEnviron {
	e := &preparingEnviron{}
	e.CheckPreparer = environtest.CheckPreparer{Environ: env.Environ, PrepareChecksFn: func(_ context.Context, ids []string) (environ.PreparedChecks, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.pages = append(e.pages, ids)
		e.preparedAt = append(e.preparedAt, clk.Now())
		if prepareErr != nil {
			return nil, prepareErr
		}
		return environtest.PreparedChecksFn(func(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
			e.mu.Lock()
			e.prepared = append(e.prepared, r.ID)
			e.mu.Unlock()
			return env.CheckResource(ctx, r, opts)
		}), nil
	}}
	return e
}

func (e *preparingEnviron) seen() (pages [][]string, at []time.Time, prepared []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pages, e.preparedAt, e.prepared
}

// waitPages waits until n pages were prepared.
func (e *preparingEnviron) waitPages(c *gc.C, n int) {
	testkit.Eventually(c, testkit.Holds(fmt.Sprintf("%d pages prepared", n), func() bool {
		pages, _, _ := e.seen()
		return len(pages) >= n
	}))
}

// swappableEnvirons is a provisioner set whose environs a test may replace while the worker
// runs.
type swappableEnvirons struct {
	mu   sync.Mutex
	envs map[string]environ.Environ
}

func (f *swappableEnvirons) Get(name string) (environ.Environ, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	env, ok := f.envs[name]
	if !ok {
		return nil, name, fmt.Errorf("provisioner %q is not in the provisioner set", name)
	}
	return env, name, nil
}

func (f *swappableEnvirons) set(name string, env environ.Environ) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.envs[name] = env
}

func (s *workerSuite) TestChecksGoThroughTheirPagesPreparedChecks(c *gc.C) {
	pool := newPreparingEnviron(s.env, s.clock, nil)
	other := newFakeEnviron(s.clock)
	s.environs.envs = map[string]environ.Environ{"pool": pool, "other": other}
	for _, id := range []string{"r1", "r2", "r4", "r5"} {
		s.store.add(id)
	}
	s.store.addOn("r3", "other")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// The checks keep their slots of the interval: 12s apart, pages of 3.
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0})
	c.Assert(s.clock.WaitAdvance(12*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r2", at: s.t0.Add(12 * time.Second)})
	c.Assert(s.clock.WaitAdvance(12*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(other.calls.Next(c), gc.Equals, call{id: "r3", at: s.t0.Add(24 * time.Second)})
	// The next page is read and prepared before the clock moves on: r3's check holds a
	// timeout timer for a moment, which WaitAdvance would otherwise take for the loop's.
	pool.waitPages(c, 2)
	c.Assert(s.clock.WaitAdvance(12*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r4", at: s.t0.Add(36 * time.Second)})
	c.Assert(s.clock.WaitAdvance(12*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r5", at: s.t0.Add(48 * time.Second)})

	pages, at, prepared := pool.seen()
	// Each page is prepared when it is read, with its resources of the environ only.
	c.Check(pages, gc.DeepEquals, [][]string{{"r1", "r2"}, {"r4", "r5"}})
	c.Check(at, gc.DeepEquals, []time.Time{s.t0, s.t0.Add(24 * time.Second)})
	c.Check(prepared, gc.DeepEquals, []string{"r1", "r2", "r4", "r5"})
	c.Check(s.metrics.wait(c, "resource", 5), gc.HasLen, 5)
}

func (s *workerSuite) TestChecksOneByOneWhenPreparingFails(c *gc.C) {
	pool := newPreparingEnviron(s.env, s.clock, errors.New("database unreachable"))
	s.environs.envs = map[string]environ.Environ{"pool": pool}
	logs := newLogCapture()
	s.config.Logger = slog.New(logs)
	s.store.add("r1")
	s.store.add("r2")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0})
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r2", at: s.t0.Add(30 * time.Second)})
	logs.waitCount(c, "cannot prepare a page of checks; checking its resources one at a time pool", 1)
	_, _, prepared := pool.seen()
	c.Check(prepared, gc.HasLen, 0)
	c.Check(s.metrics.wait(c, "resource", 2), gc.DeepEquals, []observation{
		{"resource", "pool", "healthy"}, {"resource", "pool", "healthy"},
	})
}

func (s *workerSuite) TestPreparedChecksOfAReplacedEnvironAreNotUsed(c *gc.C) {
	old := newPreparingEnviron(s.env, s.clock, nil)
	environs := &swappableEnvirons{envs: map[string]environ.Environ{"pool": old}}
	s.config.Environs = environs
	s.store.add("r1")
	s.store.add("r2")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(s.env.calls.Next(c), gc.Equals, call{id: "r1", at: s.t0})
	replacement := newFakeEnviron(s.clock)
	environs.set("pool", replacement)
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(replacement.calls.Next(c), gc.Equals, call{id: "r2", at: s.t0.Add(30 * time.Second)})
	_, _, prepared := old.seen()
	c.Check(prepared, gc.DeepEquals, []string{"r1"})
	s.env.calls.None(c, shortWait)
}
