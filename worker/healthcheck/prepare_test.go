package healthcheck_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/environ"
)

// preparingEnviron is a fakeEnviron that prepares checks a page at a time and records which
// checks went through what it prepared.
type preparingEnviron struct {
	*fakeEnviron

	mu         sync.Mutex
	pages      [][]string
	preparedAt []time.Time
	prepared   []string // ids checked through prepared checks
	prepareErr error
}

func (e *preparingEnviron) PrepareChecks(ctx context.Context, ids []string) (environ.PreparedChecks, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pages = append(e.pages, ids)
	e.preparedAt = append(e.preparedAt, e.clock.Now())
	if e.prepareErr != nil {
		return nil, e.prepareErr
	}
	return preparedChecks{e}, nil
}

func (e *preparingEnviron) seen() (pages [][]string, at []time.Time, prepared []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pages, e.preparedAt, e.prepared
}

// waitPages waits until n pages were prepared.
func (e *preparingEnviron) waitPages(c *gc.C, n int) {
	deadline := time.Now().Add(longWait)
	for {
		if pages, _, _ := e.seen(); len(pages) >= n {
			return
		}
		if time.Now().After(deadline) {
			c.Fatalf("%d pages were never prepared", n)
		}
		runtime.Gosched()
	}
}

type preparedChecks struct{ e *preparingEnviron }

func (p preparedChecks) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	p.e.mu.Lock()
	p.e.prepared = append(p.e.prepared, r.ID)
	p.e.mu.Unlock()
	return p.e.fakeEnviron.CheckResource(ctx, r, opts)
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
	pool := &preparingEnviron{fakeEnviron: s.env}
	other := newFakeEnviron(s.clock)
	s.environs.envs = map[string]environ.Environ{"pool": pool, "other": other}
	for _, id := range []string{"r1", "r2", "r4", "r5"} {
		s.store.add(id)
	}
	s.store.addOn("r3", "other")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	// The checks keep their slots of the interval: 12s apart, pages of 3.
	c.Check(pool.next(c), gc.Equals, call{id: "r1", at: s.t0})
	c.Assert(s.clock.WaitAdvance(12*time.Second, longWait, 1), gc.IsNil)
	c.Check(pool.next(c), gc.Equals, call{id: "r2", at: s.t0.Add(12 * time.Second)})
	c.Assert(s.clock.WaitAdvance(12*time.Second, longWait, 1), gc.IsNil)
	c.Check(other.next(c), gc.Equals, call{id: "r3", at: s.t0.Add(24 * time.Second)})
	// The next page is read and prepared before the clock moves on: r3's check holds a
	// timeout timer for a moment, which WaitAdvance would otherwise take for the loop's.
	pool.waitPages(c, 2)
	c.Assert(s.clock.WaitAdvance(12*time.Second, longWait, 1), gc.IsNil)
	c.Check(pool.next(c), gc.Equals, call{id: "r4", at: s.t0.Add(36 * time.Second)})
	c.Assert(s.clock.WaitAdvance(12*time.Second, longWait, 1), gc.IsNil)
	c.Check(pool.next(c), gc.Equals, call{id: "r5", at: s.t0.Add(48 * time.Second)})

	pages, at, prepared := pool.seen()
	// Each page is prepared when it is read, with its resources of the environ only.
	c.Check(pages, gc.DeepEquals, [][]string{{"r1", "r2"}, {"r4", "r5"}})
	c.Check(at, gc.DeepEquals, []time.Time{s.t0, s.t0.Add(24 * time.Second)})
	c.Check(prepared, gc.DeepEquals, []string{"r1", "r2", "r4", "r5"})
	c.Check(s.metrics.wait(c, "resource", 5), gc.HasLen, 5)
}

func (s *workerSuite) TestChecksOneByOneWhenPreparingFails(c *gc.C) {
	pool := &preparingEnviron{fakeEnviron: s.env, prepareErr: errors.New("database unreachable")}
	s.environs.envs = map[string]environ.Environ{"pool": pool}
	logs := newLogCapture()
	s.config.Logger = slog.New(logs)
	s.store.add("r1")
	s.store.add("r2")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(pool.next(c), gc.Equals, call{id: "r1", at: s.t0})
	c.Assert(s.clock.WaitAdvance(30*time.Second, longWait, 1), gc.IsNil)
	c.Check(pool.next(c), gc.Equals, call{id: "r2", at: s.t0.Add(30 * time.Second)})
	logs.waitCount(c, "cannot prepare a page of checks; checking its resources one at a time pool", 1)
	_, _, prepared := pool.seen()
	c.Check(prepared, gc.HasLen, 0)
	c.Check(s.metrics.wait(c, "resource", 2), gc.DeepEquals, []observation{
		{"resource", "pool", "healthy"}, {"resource", "pool", "healthy"},
	})
}

func (s *workerSuite) TestPreparedChecksOfAReplacedEnvironAreNotUsed(c *gc.C) {
	old := &preparingEnviron{fakeEnviron: s.env}
	environs := &swappableEnvirons{envs: map[string]environ.Environ{"pool": old}}
	s.config.Environs = environs
	s.store.add("r1")
	s.store.add("r2")
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(old.next(c), gc.Equals, call{id: "r1", at: s.t0})
	replacement := newFakeEnviron(s.clock)
	environs.set("pool", replacement)
	c.Assert(s.clock.WaitAdvance(30*time.Second, longWait, 1), gc.IsNil)
	c.Check(replacement.next(c), gc.Equals, call{id: "r2", at: s.t0.Add(30 * time.Second)})
	_, _, prepared := old.seen()
	c.Check(prepared, gc.DeepEquals, []string{"r1"})
	old.none(c)
}
