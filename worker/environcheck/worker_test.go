package environcheck_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/metrics"
	"github.com/berth-dev/berth/worker/environcheck"
)

type workerSuite struct {
	t0       time.Time
	clock    *testclock.Clock
	environs *fakeEnvirons
	metrics  *fakeMetrics
	logs     *syncBuffer
	config   environcheck.Config
}

var _ = gc.Suite(&workerSuite{})

// checkedEnviron returns an environ whose Check logs the clock's time on checks, then, when
// there is a gate, waits at it, and answers checkErr.
func (s *workerSuite) checkedEnviron(checkErr error, gate *environtest.Gate) (env environ.Environ, checks *environtest.Calls[time.Time]) {
	checks = environtest.NewCalls[time.Time]()
	return &environtest.Environ{CheckFn: func(ctx context.Context) error {
		checks.Add(s.clock.Now())
		if gate != nil {
			if err := gate.Wait(ctx); err != nil {
				return fmt.Errorf("check cut short: %w", err)
			}
		}
		return checkErr
	}}, checks
}

// fakeEnvirons is a provisioner set.
type fakeEnvirons struct{ envs map[string]environ.Environ }

func (f *fakeEnvirons) Names() []string {
	var names []string
	for name := range f.envs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (f *fakeEnvirons) Get(name string) (environ.Environ, string, error) {
	env, ok := f.envs[name]
	if !ok {
		return nil, name, fmt.Errorf("provisioner %q is not in the provisioner set", name)
	}
	return env, name, nil
}

// fakeMetrics records each environ check as "name: error" ("name: " when it passed).
type fakeMetrics struct {
	mu   sync.Mutex
	seen []string
}

func (m *fakeMetrics) ObserveEnvironCheck(provisioner string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	text := ""
	if err != nil {
		text = err.Error()
	}
	m.seen = append(m.seen, provisioner+": "+text)
}

// wait waits for n observations and returns them sorted.
func (m *fakeMetrics) wait(c *gc.C, n int) []string {
	var got []string
	testkit.Eventually(c, func() error {
		m.mu.Lock()
		got = slices.Clone(m.seen)
		m.mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("timed out waiting for %d observations; have %v", n, got)
		}
		return nil
	})
	slices.Sort(got)
	return got
}

// syncBuffer is a log buffer safe for the worker's goroutines and the test's.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.clock = testclock.NewClock(s.t0)
	s.environs = &fakeEnvirons{envs: map[string]environ.Environ{}}
	s.metrics = &fakeMetrics{}
	s.logs = &syncBuffer{}
	s.config = environcheck.Config{
		Environs: s.environs,
		Clock:    s.clock,
		Logger:   slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:  s.metrics,
		Settings: environcheck.Settings{
			Interval:     time.Minute,
			CheckTimeout: 10 * time.Minute,
		},
	}
}

func (s *workerSuite) start(c *gc.C) worker.Worker {
	w, err := environcheck.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	return w
}

func (s *workerSuite) TestAFailingEnvironDoesNotStopTheOthers(c *gc.C) {
	broken, brokenChecks := s.checkedEnviron(errors.New("cluster unreachable"), nil)
	fine, fineChecks := s.checkedEnviron(nil, nil)
	s.environs.envs = map[string]environ.Environ{"broken": broken, "fine": fine}
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	for round := range 3 {
		c.Check(brokenChecks.Next(c), gc.Equals, s.t0.Add(time.Duration(round)*time.Minute))
		c.Check(fineChecks.Next(c), gc.Equals, s.t0.Add(time.Duration(round)*time.Minute))
		// Both results are in before the next checks are due.
		s.metrics.wait(c, 2*(round+1))
		c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	}
	// The fourth checks are in too; only the broken environ's count as failures.
	c.Check(s.metrics.wait(c, 8), gc.DeepEquals, []string{
		"broken: cluster unreachable", "broken: cluster unreachable", "broken: cluster unreachable", "broken: cluster unreachable",
		"fine: ", "fine: ", "fine: ", "fine: ",
	})
	c.Check(strings.Count(s.logs.String(), `msg="provisioner health check failed" provisioner=broken error="cluster unreachable"`), gc.Equals, 4)
	environs := w.(worker.Reporter).Report()["environs"].(map[string]any)
	c.Check(environs["broken"].(map[string]any)["error"], gc.Equals, "cluster unreachable")
	c.Check(environs["broken"].(map[string]any)["healthy"], gc.Equals, false)
	c.Check(environs["fine"].(map[string]any)["healthy"], gc.Equals, true)
}

func (s *workerSuite) TestAHangingCheckDelaysNoOtherAndIsNotStartedTwice(c *gc.C) {
	gate := environtest.NewGate()
	hanging, hangingChecks := s.checkedEnviron(nil, gate)
	fine, fineChecks := s.checkedEnviron(nil, nil)
	s.environs.envs = map[string]environ.Environ{"hanging": hanging, "fine": fine}
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	c.Check(hangingChecks.Next(c), gc.Equals, s.t0)
	c.Check(fineChecks.Next(c), gc.Equals, s.t0)
	s.metrics.wait(c, 1)
	for k := 1; k <= 3; k++ {
		// The loop's timer and the hanging check's timeout.
		c.Assert(s.clock.WaitAdvance(time.Minute, testkit.LongWait, 2), gc.IsNil)
		c.Check(fineChecks.Next(c), gc.Equals, s.t0.Add(time.Duration(k)*time.Minute))
		s.metrics.wait(c, k+1)
	}
	if at, ok := hangingChecks.TryNext(); ok {
		c.Fatalf("the hanging environ was checked again at %s while its check was in flight", at)
	}
	// Released, it is checked again at once: it has been due since the first minute.
	gate.Release()
	c.Check(hangingChecks.Next(c), gc.Equals, s.t0.Add(3*time.Minute))
	c.Check(s.metrics.wait(c, 5)[4], gc.Equals, "hanging: ")
}

func (s *workerSuite) TestACheckIsBoundedByItsTimeout(c *gc.C) {
	hanging, checks := s.checkedEnviron(nil, environtest.NewGate())
	s.environs.envs = map[string]environ.Environ{"hanging": hanging}
	s.config.CheckTimeout = 30 * time.Second
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(checks.Next(c), gc.Equals, s.t0)
	c.Assert(s.clock.WaitAdvance(30*time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.metrics.wait(c, 1), gc.DeepEquals, []string{"hanging: check cut short: context canceled (timed out after 30s)"})
}

func (s *workerSuite) TestKillCancelsChecksInFlightUncounted(c *gc.C) {
	hanging, checks := s.checkedEnviron(nil, environtest.NewGate())
	s.environs.envs = map[string]environ.Environ{"hanging": hanging}
	w := s.start(c)
	c.Check(checks.Next(c), gc.Equals, s.t0)
	workertest.CleanKill(c, w)
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	c.Check(s.metrics.seen, gc.HasLen, 0)
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*environcheck.Config)
		field  string
	}{
		{func(cfg *environcheck.Config) { cfg.Environs = nil }, "Environs"},
		{func(cfg *environcheck.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *environcheck.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *environcheck.Config) { cfg.Metrics = nil }, "Metrics"},
		{func(cfg *environcheck.Config) { cfg.Interval = 0 }, "Interval 0s .*positive"},
		{func(cfg *environcheck.Config) { cfg.CheckTimeout = 0 }, "CheckTimeout 0s .*positive"},
	} {
		config := s.config
		t.mutate(&config)
		w, err := environcheck.NewWorker(config)
		c.Check(w, gc.IsNil)
		testkit.CheckNotValid(c, err, t.field)
	}
}

// teeMetrics records into the agent's metrics and the fake, which says when they are in.
type teeMetrics struct {
	real *metrics.Metrics
	fake *fakeMetrics
}

func (t teeMetrics) ObserveEnvironCheck(provisioner string, err error) {
	t.real.ObserveEnvironCheck(provisioner, err)
	t.fake.ObserveEnvironCheck(provisioner, err)
}

func (s *workerSuite) TestFailuresAreCountedInTheAgentsMetrics(c *gc.C) {
	broken, _ := s.checkedEnviron(errors.New("host b is down"), nil)
	fine, _ := s.checkedEnviron(nil, nil)
	s.environs.envs = map[string]environ.Environ{"pool": broken, "k8s": fine}
	m := metrics.New()
	s.config.Metrics = teeMetrics{real: m, fake: s.metrics}
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	s.metrics.wait(c, 2)

	families, err := m.Gather()
	c.Assert(err, gc.IsNil)
	got := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != "berth_environ_check_failures_total" {
			continue
		}
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				got[l.GetName()+"="+l.GetValue()] = metric.GetCounter().GetValue()
			}
		}
	}
	c.Check(got, gc.DeepEquals, map[string]float64{"provisioner=pool": 1, "provisioner=k8s": 0})
}
