package changelog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/changelog"
)

type workerSuite struct {
	clock  *testclock.Clock
	pruner *fakePruner
	config changelog.Config
}

var _ = gc.Suite(&workerSuite{})

// fakePruner reports every change-log retention it is given and answers with the next
// scripted error; events and capacity samples report their retentions on their own channel.
// Every prune must carry the worker's term.
type fakePruner struct {
	term           domain.Term
	cutoffs        chan time.Duration
	historyCutoffs chan string
	errs           chan error
}

func (p *fakePruner) PruneChanges(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	if term != p.term {
		return 0, fmt.Errorf("pruned under term %+v, not the worker's %+v", term, p.term)
	}
	p.cutoffs <- olderThan
	select {
	case err := <-p.errs:
		return 0, err
	default:
		return 7, nil
	}
}

func (p *fakePruner) PruneEvents(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	p.historyCutoffs <- fmt.Sprintf("events %s by %+v", olderThan, term)
	return 3, nil
}

func (p *fakePruner) PruneCapacitySamples(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	p.historyCutoffs <- fmt.Sprintf("samples %s by %+v", olderThan, term)
	return 2, nil
}

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	term := domain.Term{Holder: "agent-a", Session: 3}
	s.pruner = &fakePruner{term: term, cutoffs: make(chan time.Duration, 10), historyCutoffs: make(chan string, 20), errs: make(chan error, 10)}
	s.config = changelog.Config{
		Pruner: s.pruner,
		Term:   term,
		Clock:  s.clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Settings: changelog.Settings{
			Interval:      time.Hour,
			Retain:        24 * time.Hour,
			HistoryRetain: 7 * 24 * time.Hour,
		},
	}
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		mutate func(*changelog.Config)
		field  string
	}{
		{func(cfg *changelog.Config) { cfg.Pruner = nil }, "Pruner"},
		{func(cfg *changelog.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *changelog.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *changelog.Config) { cfg.Term = domain.Term{} }, "Term"},
		{func(cfg *changelog.Config) { cfg.Term.Session = 0 }, "Term"},
		{func(cfg *changelog.Config) { cfg.Interval = 0 }, "Interval 0s"},
		{func(cfg *changelog.Config) { cfg.Retain = 0 }, "Retain 0s"},
		{func(cfg *changelog.Config) { cfg.HistoryRetain = 0 }, "HistoryRetain 0s"},
	} {
		config := s.config
		t.mutate(&config)
		testkit.CheckNotValid(c, config.Validate(), t.field)
		w, err := changelog.NewWorker(config)
		workertest.CheckNilOrKill(c, w)
		testkit.CheckNotValid(c, err, t.field)
	}
}

func (s *workerSuite) TestPrunesEveryInterval(c *gc.C) {
	w, err := changelog.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)

	for tick := 1; tick <= 3; tick++ {
		c.Assert(s.clock.WaitAdvance(time.Hour, testkit.LongWait, 1), gc.IsNil)
		// The store is handed the retentions, for the database's clock to decide what is
		// old; the worker's clock only times the rounds.
		c.Check(s.nextCutoff(c), gc.Equals, 24*time.Hour)
		c.Check(s.nextHistoryCutoff(c), gc.Equals, "events 168h0m0s by {Holder:agent-a Session:3}")
		c.Check(s.nextHistoryCutoff(c), gc.Equals, "samples 168h0m0s by {Holder:agent-a Session:3}")
	}
	s.assertNoPrune(c)
}

func (s *workerSuite) TestKeepsGoingWhenNoLongerTheLeader(c *gc.C) {
	s.pruner.errs <- fmt.Errorf("prune change log: %w", domain.ErrNotLeader)
	w, err := changelog.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)

	c.Assert(s.clock.WaitAdvance(time.Hour, testkit.LongWait, 1), gc.IsNil)
	s.nextCutoff(c)
	c.Assert(s.clock.WaitAdvance(0, testkit.LongWait, 1), gc.IsNil)
	report := w.(worker.Reporter).Report()["change-log"].(map[string]any)
	c.Check(report["error"], gc.Matches, ".*leadership term the write carried has ended")
	workertest.CheckAlive(c, w)
}

func (s *workerSuite) TestDoesNotPruneBeforeInterval(c *gc.C) {
	w, err := changelog.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)

	c.Assert(s.clock.WaitAdvance(time.Hour-time.Second, testkit.LongWait, 1), gc.IsNil)
	s.assertNoPrune(c)
	// The first prune is the one at the interval, not one before it.
	c.Assert(s.clock.WaitAdvance(time.Second, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.nextCutoff(c), gc.Equals, 24*time.Hour)
}

func (s *workerSuite) TestSurvivesPruneError(c *gc.C) {
	s.pruner.errs <- errors.New("connection lost")
	w, err := changelog.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)

	c.Assert(s.clock.WaitAdvance(time.Hour, testkit.LongWait, 1), gc.IsNil)
	s.nextCutoff(c)
	// The timer is set again only once the failed prune is done, so this also waits for it.
	c.Assert(s.clock.WaitAdvance(time.Hour, testkit.LongWait, 1), gc.IsNil)
	c.Check(s.nextCutoff(c), gc.Equals, 24*time.Hour)
	workertest.CheckAlive(c, w)
}

func (s *workerSuite) TestReport(c *gc.C) {
	s.pruner.errs <- errors.New("connection lost")
	w, err := changelog.NewWorker(s.config)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	reporter := w.(worker.Reporter)
	settings := map[string]any{"interval": "1h0m0s", "retain": "24h0m0s", "history-retain": "168h0m0s"}
	c.Check(reporter.Report(), gc.DeepEquals, settings)

	c.Assert(s.clock.WaitAdvance(time.Hour, testkit.LongWait, 1), gc.IsNil)
	s.nextCutoff(c)
	c.Assert(s.clock.WaitAdvance(0, testkit.LongWait, 1), gc.IsNil)
	c.Check(reporter.Report(), gc.DeepEquals, map[string]any{
		"interval":         "1h0m0s",
		"retain":           "24h0m0s",
		"history-retain":   "168h0m0s",
		"change-log":       map[string]any{"older-than": "24h0m0s", "pruned": int64(0), "error": "connection lost"},
		"resource-events":  map[string]any{"older-than": "168h0m0s", "pruned": int64(3)},
		"capacity-samples": map[string]any{"older-than": "168h0m0s", "pruned": int64(2)},
	})

	c.Assert(s.clock.WaitAdvance(time.Hour, testkit.LongWait, 1), gc.IsNil)
	s.nextCutoff(c)
	c.Assert(s.clock.WaitAdvance(0, testkit.LongWait, 1), gc.IsNil)
	report := reporter.Report()
	c.Check(report["change-log"], gc.DeepEquals, map[string]any{"older-than": "24h0m0s", "pruned": int64(7)})
}

func (s *workerSuite) nextCutoff(c *gc.C) time.Duration {
	select {
	case olderThan := <-s.pruner.cutoffs:
		return olderThan
	case <-time.After(testkit.LongWait):
		c.Fatalf("the worker did not prune")
		return 0
	}
}

func (s *workerSuite) nextHistoryCutoff(c *gc.C) string {
	select {
	case cutoff := <-s.pruner.historyCutoffs:
		return cutoff
	case <-time.After(testkit.LongWait):
		c.Fatalf("the worker did not prune the history")
		return ""
	}
}

// assertNoPrune checks that the worker has made no prune the test has not taken. The worker
// sets its timer only after pruning, so once the timer waits, every prune made is reported.
func (s *workerSuite) assertNoPrune(c *gc.C) {
	c.Assert(s.clock.WaitAdvance(0, testkit.LongWait, 1), gc.IsNil)
	select {
	case cutoff := <-s.pruner.cutoffs:
		c.Fatalf("unexpected prune with cutoff %v", cutoff)
	default:
	}
}
