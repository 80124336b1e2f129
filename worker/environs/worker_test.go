package environs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock/testclock"
	jujuerrors "github.com/juju/errors"
	"github.com/juju/worker/v4/dependency"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/environs"
)

func TestPackage(t *testing.T) { gc.TestingT(t) }

// twoPools has two provisioners of the fake type; poolJSON is pool's canonical entry.
const (
	twoPools = `{"pool": {"type": "fake", "spec": {"b": 1, "a": [1, 2]}}, "other": {"type": "fake", "spec": {}}}`
	poolJSON = `{"spec":{"a":[1,2],"b":1},"type":"fake"}`
)

type workerSuite struct {
	builder *fakeBuilder
	source  *fakeSource
	specs   *fakeSpecs
	slots   domain.SlotStore
	logs    *logLines
}

var _ = gc.Suite(&workerSuite{})

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.builder = newFakeBuilder()
	s.source = newFakeSource(twoPools)
	s.specs = newFakeSpecs()
	s.slots = fakeSlots{}
	s.logs = newLogLines()
}

func (s *workerSuite) config() environs.Config {
	return environs.Config{
		Source:  s.source,
		Default: "pool",
		Builder: s.builder,
		Slots:   s.slots,
		Specs:   s.specs,
		Budgets: fakeBudgets{},
		Clock:   testclock.NewClock(time.Now()),
		Logger:  s.logs.logger(),
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (s *workerSuite) TestBuildsTheSetAndClosesItOnKill(c *gc.C) {
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	c.Check(s.builder.gotJSON, gc.Equals, twoPools)
	c.Check(s.builder.gotDefault, gc.Equals, "pool")
	c.Check(s.builder.gotDeps.Slots, gc.Equals, s.slots)
	c.Check(s.builder.gotDeps.Budgets, gc.Equals, fakeBudgets{})
	c.Check(w.Report()["default"], gc.Equals, "pool")
	workertest.CleanKill(c, w)
	c.Check(s.builder.closed(), gc.Equals, 2)
}

func (s *workerSuite) TestRecordsEveryProvisionersFingerprint(c *gc.C) {
	s.specs.bump["pool"] = 3
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	calls := s.specs.wait(c, 2)
	// The fingerprint is the sha256 of the canonical {type, spec}: the format is part of the
	// stored state, and changing it would reconcile every resource once on upgrade.
	c.Check(calls, gc.DeepEquals, []applied{
		{"other", sha(`{"spec":{},"type":"fake"}`)},
		{"pool", sha(poolJSON)},
	})
	line := s.logs.wait(c, `msg="provisioner spec changed: resources scheduled for reconcile"`)
	c.Check(line, gc.Matches, `.*provisioner=pool resources=3 .*`)
	report := w.Report()["provisioners"].(map[string]any)
	c.Check(report["pool"], gc.DeepEquals, map[string]any{"type": "fake", "fingerprint": sha(poolJSON)})
}

func (s *workerSuite) TestMarksTheProvisionersOutsideTheSetAbsent(c *gc.C) {
	s.specs.absent = []string{"gone", "old"}
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	mark := s.specs.waitMark(c)
	c.Check(mark.present, gc.DeepEquals, []string{"other", "pool"})
	// After every spec is applied: a provisioner back in the set must see its absence to
	// reconcile its resources, so it cannot be marked present again first.
	c.Check(mark.appliedFirst, gc.Equals, 2)
	line := s.logs.wait(c, `level=WARN`, `msg="provisioners removed from the set`)
	c.Check(line, gc.Matches, `.*their resources are kept, not deprovisioned, and are reconciled once the provisioner is back.* provisioners="\[gone old\]"`)
	workertest.CheckAlive(c, w)
}

func (s *workerSuite) TestNoProvisionerAbsentLogsNothing(c *gc.C) {
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	s.specs.waitMark(c)
	workertest.CleanKill(c, w)
	close(s.logs.lines)
	for line := range s.logs.lines {
		c.Check(strings.Contains(line, "removed from the set"), gc.Equals, false, gc.Commentf("%s", line))
	}
}

func (s *workerSuite) TestMarkingAbsentFailureStopsTheWorker(c *gc.C) {
	s.specs.markErr = errors.New("connection refused")
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	err = workertest.CheckKilled(c, w)
	c.Check(err, gc.ErrorMatches, `record the provisioners that are not in the set: connection refused`)
	c.Check(s.builder.closed(), gc.Equals, 2)
}

func (s *workerSuite) TestFingerprintsAreStableAcrossLayouts(c *gc.C) {
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	first := s.specs.wait(c, 2)
	workertest.CleanKill(c, w)

	s.source = newFakeSource(`{
		"other": {"spec": {}, "type": "fake"},
		"pool":  {"spec": {"a": [1, 2],   "b": 1}, "type": "fake"}
	}`)
	w, err = environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	c.Check(s.specs.wait(c, 4)[2:], gc.DeepEquals, first)
}

func (s *workerSuite) TestBouncesWhenTheSetIsReplaced(c *gc.C) {
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	s.specs.wait(c, 2)
	close(s.source.changed)
	err = workertest.CheckKilled(c, w)
	c.Check(errors.Is(err, dependency.ErrBounce), gc.Equals, true)
	c.Check(s.builder.closed(), gc.Equals, 2)
	s.logs.wait(c, "provisioner set replaced")
}

func (s *workerSuite) TestReplacedWhileStartingStillBounces(c *gc.C) {
	close(s.source.changed)
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	err = workertest.CheckKilled(c, w)
	c.Check(errors.Is(err, dependency.ErrBounce), gc.Equals, true)
}

func (s *workerSuite) TestSpecStoreFailureStopsTheWorker(c *gc.C) {
	s.specs.err = errors.New("connection refused")
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	err = workertest.CheckKilled(c, w)
	c.Check(err, gc.ErrorMatches, `record the spec of provisioner "other": connection refused`)
	c.Check(s.builder.closed(), gc.Equals, 2)
}

func (s *workerSuite) TestInvalidSetIsAnError(c *gc.C) {
	s.builder.err = errors.New(`provisioner "pool" (static): runtimes[0].slots: must be at least 1`)
	_, err := environs.NewWorker(s.config())
	c.Assert(err, gc.ErrorMatches, `build provisioner set: provisioner "pool" \(static\): runtimes\[0\].slots: must be at least 1`)
}

func (s *workerSuite) TestReportShowsTheBudgets(c *gc.C) {
	s.source = newFakeSource(`{"pool": {"type": "budgeted", "spec": {}}, "other": {"type": "fake", "spec": {}}}`)
	w, err := environs.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	report := w.Report()["provisioners"].(map[string]any)
	c.Check(report["pool"].(map[string]any)["budget"], gc.DeepEquals, map[string]any{"requests-per-second": 20.0, "waits": int64(3)})
	_, shown := report["other"].(map[string]any)["budget"]
	c.Check(shown, gc.Equals, false)
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, t := range []struct {
		breakIt func(*environs.Config)
		field   string
	}{
		{func(cfg *environs.Config) { cfg.Source = nil }, "Source"},
		{func(cfg *environs.Config) { cfg.Builder = nil }, "Builder"},
		{func(cfg *environs.Config) { cfg.Slots = nil }, "Slots"},
		{func(cfg *environs.Config) { cfg.Specs = nil }, "Specs"},
		{func(cfg *environs.Config) { cfg.Budgets = nil }, "Budgets"},
		{func(cfg *environs.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *environs.Config) { cfg.Logger = nil }, "Logger"},
	} {
		cfg := s.config()
		t.breakIt(&cfg)
		err := cfg.Validate()
		c.Check(jujuerrors.Is(err, jujuerrors.NotValid), gc.Equals, true, gc.Commentf("err = %v, want NotValid", err))
		c.Check(err, gc.ErrorMatches, ".*"+t.field+".*")
	}
}

// fakeBuilder builds sets through a real registry of the "fake" type, recording what it was
// asked for and every environ it made.
type fakeBuilder struct {
	registry   *environ.Registry
	err        error
	gotJSON    string
	gotDefault string
	gotDeps    environ.Deps

	mu     sync.Mutex
	closes int // environs built and closed since
}

func newFakeBuilder() *fakeBuilder {
	b := &fakeBuilder{registry: environ.NewRegistry()}
	b.registry.Register("fake", func(string, json.RawMessage, environ.Deps) (environ.Environ, error) {
		closed := false
		// The worker calls nothing but Close.
		return &environtest.Environ{CloseFn: func() error {
			b.mu.Lock()
			defer b.mu.Unlock()
			if !closed {
				closed = true
				b.closes++
			}
			return nil
		}}, nil
	})
	b.registry.Register("budgeted", func(string, json.RawMessage, environ.Deps) (environ.Environ, error) {
		return budgetedEnviron{&environtest.Environ{}}, nil
	})
	return b
}

// budgetedEnviron is an environ with a shared rate budget to report.
type budgetedEnviron struct{ *environtest.Environ }

func (budgetedEnviron) BudgetReport() map[string]any {
	return map[string]any{"requests-per-second": 20.0, "waits": int64(3)}
}

func (b *fakeBuilder) NewSet(setJSON []byte, defaultName string, deps environ.Deps) (*environ.Set, error) {
	b.gotJSON, b.gotDefault, b.gotDeps = string(setJSON), defaultName, deps
	if b.err != nil {
		return nil, b.err
	}
	return b.registry.NewSet(setJSON, defaultName, deps)
}

// closed is how many of the environs built were closed.
func (b *fakeBuilder) closed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

type fakeSource struct {
	data    []byte
	changed chan struct{}
}

func newFakeSource(setJSON string) *fakeSource {
	return &fakeSource{data: []byte(setJSON), changed: make(chan struct{})}
}

func (f *fakeSource) Current() ([]byte, <-chan struct{}) { return f.data, f.changed }

type applied struct{ provisioner, fingerprint string }

// fakeSpecs records ApplyProvisionerSpec calls and answers with bump[provisioner], and
// MarkProvisionersAbsent calls, answering with absent.
type fakeSpecs struct {
	bump    map[string]int64
	err     error
	absent  []string
	markErr error
	calls   chan applied
	seen    []applied
	marks   chan marked

	mu      sync.Mutex
	applies int
}

// marked is a MarkProvisionersAbsent call and how many ApplyProvisionerSpec calls came first.
type marked struct {
	present      []string
	appliedFirst int
}

func newFakeSpecs() *fakeSpecs {
	return &fakeSpecs{bump: map[string]int64{}, calls: make(chan applied, 100), marks: make(chan marked, 100)}
}

func (f *fakeSpecs) ApplyProvisionerSpec(_ context.Context, provisioner, fingerprint string) (int64, error) {
	if f.err != nil {
		return 0, f.err
	}
	f.mu.Lock()
	f.applies++
	f.mu.Unlock()
	f.calls <- applied{provisioner, fingerprint}
	return f.bump[provisioner], nil
}

func (f *fakeSpecs) MarkProvisionersAbsent(_ context.Context, present []string) ([]string, error) {
	f.mu.Lock()
	m := marked{present: present, appliedFirst: f.applies}
	f.mu.Unlock()
	f.marks <- m
	return f.absent, f.markErr
}

// waitMark returns the next MarkProvisionersAbsent call.
func (f *fakeSpecs) waitMark(c *gc.C) marked {
	select {
	case m := <-f.marks:
		return m
	case <-time.After(testkit.LongWait):
		c.Fatalf("MarkProvisionersAbsent was not called")
		return marked{}
	}
}

// wait returns every call so far once there are n.
func (f *fakeSpecs) wait(c *gc.C, n int) []applied {
	for len(f.seen) < n {
		select {
		case call := <-f.calls:
			f.seen = append(f.seen, call)
		case <-time.After(testkit.LongWait):
			c.Fatalf("ApplyProvisionerSpec was called %d times, want %d", len(f.seen), n)
		}
	}
	return f.seen
}

type fakeSlots struct{ domain.SlotStore }

type fakeBudgets struct{ domain.BudgetStore }

type fakeState struct{ domain.State }

func (fakeState) ApplyProvisionerSpec(context.Context, string, string) (int64, error) {
	return 0, nil
}

func (fakeState) MarkProvisionersAbsent(context.Context, []string) ([]string, error) {
	return nil, nil
}

// logLines collects the worker's log lines (text format) for the test to wait on.
type logLines struct{ lines chan string }

func newLogLines() *logLines { return &logLines{lines: make(chan string, 1000)} }

func (l *logLines) Write(p []byte) (int, error) {
	l.lines <- string(p)
	return len(p), nil
}

func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// wait returns the next line containing every part, without its newline.
func (l *logLines) wait(c *gc.C, parts ...string) string {
	deadline := time.After(testkit.LongWait)
	for {
		select {
		case line := <-l.lines:
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return strings.TrimSuffix(line, "\n")
			}
		case <-deadline:
			c.Fatalf("no log line with %q", parts)
		}
	}
}
