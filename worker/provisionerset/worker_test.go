package provisionerset_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/provisionerset"
)

const (
	debounce = time.Second
)

// Sets of one static provisioner "pool"; v1b is v1 laid out differently.
const (
	v1  = `{"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://a:9091", "slots": 2}]}}}`
	v1b = `{
  "pool": {
    "spec": {"runtimes": [{"slots": 2, "host": "http://a:9091"}]},
    "type": "static"
  }
}`
	v2      = `{"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://a:9091", "slots": 2}, {"host": "http://b:9091", "slots": 4}]}}}`
	v3      = `{"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://c:9091", "slots": 8}]}}}`
	badSlot = `{"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://a:9091", "slots": 0}]}}}`
)

type workerSuite struct {
	dir     string
	path    string
	clock   *testclock.Clock
	logs    *logLines
	signals chan os.Signal
	workers []*provisionerset.Worker
}

var _ = gc.Suite(&workerSuite{})

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.dir = c.MkDir()
	s.path = filepath.Join(s.dir, "provisioners.json")
	c.Assert(os.WriteFile(s.path, []byte(v1), 0o644), gc.IsNil)
	s.clock = testclock.NewClock(time.Now())
	s.logs = newLogLines()
	s.signals = make(chan os.Signal, 1)
	s.workers = nil
}

func (s *workerSuite) TearDownTest(c *gc.C) {
	for _, w := range s.workers {
		workertest.CleanKill(c, w)
	}
}

func (s *workerSuite) newWorker(c *gc.C, config provisionerset.Config) *provisionerset.Worker {
	w, err := provisionerset.NewWorker(config)
	c.Assert(err, gc.IsNil)
	s.workers = append(s.workers, w)
	return w
}

func (s *workerSuite) config() provisionerset.Config {
	return provisionerset.Config{
		Signals: s.signals,
		Builder: registry(),
		Clock:   s.clock,
		Logger:  s.logs.logger(),
		Settings: provisionerset.Settings{
			Initial:  []byte(v1),
			Origin:   "file " + s.path,
			Path:     s.path,
			Default:  "pool",
			Debounce: debounce,
		},
	}
}

func registry() *environ.Registry {
	r := environ.NewRegistry()
	r.Register(static.Type, static.New)
	return r
}

// start runs the worker and waits until it watches the file and has read it once.
func (s *workerSuite) start(c *gc.C) *provisionerset.Worker {
	w := s.newWorker(c, s.config())
	s.logs.wait(c, `msg="provisioner set unchanged: nothing to reload"`, "trigger=start")
	s.drainAlarms()
	return w
}

// replace writes the set as editors and deployment tools do: a file elsewhere, renamed over
// the watched one.
func (s *workerSuite) replace(c *gc.C, content string) {
	tmp := filepath.Join(c.MkDir(), "new.json")
	c.Assert(os.WriteFile(tmp, []byte(content), 0o644), gc.IsNil)
	c.Assert(os.Rename(tmp, s.path), gc.IsNil)
}

// awaitTimer waits until the worker (re)arms its debounce timer.
func (s *workerSuite) awaitTimer(c *gc.C) {
	select {
	case <-s.clock.Alarms():
	case <-time.After(testkit.LongWait):
		c.Fatal("the worker armed no debounce timer after the file changed")
	}
}

func (s *workerSuite) drainAlarms() {
	for {
		select {
		case <-s.clock.Alarms():
		default:
			return
		}
	}
}

func current(w *provisionerset.Worker) string {
	data, _ := w.Current()
	return string(data)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func waitClosed(c *gc.C, ch <-chan struct{}, what string) {
	select {
	case <-ch:
	case <-time.After(testkit.LongWait):
		c.Fatalf("%s: the running set was not replaced", what)
	}
}

func (s *workerSuite) TestPublishesTheInitialSet(c *gc.C) {
	w := s.start(c)
	data, changed := w.Current()
	c.Check(string(data), gc.Equals, v1)
	c.Check(isClosed(changed), gc.Equals, false)
	report := w.Report()
	c.Check(report["source"], gc.Equals, "file "+s.path)
	c.Check(report["reloads"], gc.Equals, 0)
	c.Check(report["digest"], gc.Matches, "sha256:[0-9a-f]{64}")
}

func (s *workerSuite) TestFileChangeIsDebounced(c *gc.C) {
	w := s.start(c)
	_, changed := w.Current()

	s.replace(c, v2)
	s.awaitTimer(c)
	s.clock.Advance(debounce - time.Millisecond)
	s.replace(c, v3) // within the debounce: the wait starts again
	s.awaitTimer(c)
	s.clock.Advance(time.Millisecond)
	c.Check(isClosed(changed), gc.Equals, false)

	s.clock.Advance(debounce)
	waitClosed(c, changed, "file changed twice")
	c.Check(current(w), gc.Equals, v3)
	c.Check(w.Report()["reloads"], gc.Equals, 1)
	s.logs.wait(c, `msg="provisioner set reloaded: restarting the provisioners with it"`, "provisioners=[pool]", `trigger="file changed"`)
}

func (s *workerSuite) TestSignalReloadsAtOnce(c *gc.C) {
	w := s.start(c)
	_, changed := w.Current()
	s.replace(c, v2)
	s.signals <- syscall.SIGHUP
	waitClosed(c, changed, "SIGHUP")
	c.Check(current(w), gc.Equals, v2)
	s.logs.wait(c, `msg="provisioner set reloaded`, "trigger=hangup")

	// The file's own events then find nothing new.
	_, changed = w.Current()
	s.awaitTimer(c)
	s.clock.Advance(debounce)
	s.logs.wait(c, `msg="provisioner set unchanged: nothing to reload"`, `trigger="file changed"`)
	c.Check(isClosed(changed), gc.Equals, false)
	c.Check(w.Report()["reloads"], gc.Equals, 1)
}

func (s *workerSuite) TestInvalidSetKeepsTheRunningOne(c *gc.C) {
	w := s.start(c)
	_, changed := w.Current()

	s.replace(c, badSlot)
	s.awaitTimer(c)
	s.clock.Advance(debounce)
	line := s.logs.wait(c, `level=ERROR msg="provisioner set rejected: the agent keeps running the previous set"`)
	c.Check(line, gc.Matches, `.*err="provisioner set from file .*provisioners.json is invalid: provisioner \\"pool\\" \(static\), line 1, column 86: runtimes\[0\]\.slots: must be at least 1.*`)
	c.Check(strings.Contains(line, "\n"), gc.Equals, false)
	c.Check(isClosed(changed), gc.Equals, false)
	c.Check(current(w), gc.Equals, v1)
	c.Check(w.Report()["last-rejected"], gc.Matches, `.*runtimes\[0\]\.slots: must be at least 1.*`)

	// A signal tries again, and is refused again; a set without the default is refused too.
	s.signals <- syscall.SIGHUP
	s.logs.wait(c, "level=ERROR", "trigger=hangup", "runtimes[0].slots")
	s.replace(c, `{"other": {"type": "static", "spec": {"runtimes": [{"host": "http://a:9091", "slots": 2}]}}}`)
	s.awaitTimer(c)
	s.clock.Advance(debounce)
	s.logs.wait(c, "level=ERROR", `default provisioner \"pool\" is not in the provisioner set`)
	c.Assert(os.Remove(s.path), gc.IsNil)
	s.awaitTimer(c)
	s.clock.Advance(debounce)
	s.logs.wait(c, "level=ERROR", "cannot read the provisioner set from file", "no such file or directory")
	c.Check(isClosed(changed), gc.Equals, false)
	c.Check(current(w), gc.Equals, v1)

	// Once the file is fixed it is taken.
	s.replace(c, v2)
	s.awaitTimer(c)
	s.clock.Advance(debounce)
	waitClosed(c, changed, "fixed file")
	c.Check(current(w), gc.Equals, v2)
	_, hasErr := w.Report()["last-rejected"]
	c.Check(hasErr, gc.Equals, false)
}

func (s *workerSuite) TestUnchangedContentIsNoReload(c *gc.C) {
	w := s.start(c)
	_, changed := w.Current()
	s.replace(c, v1b)
	s.awaitTimer(c)
	s.clock.Advance(debounce)
	s.logs.wait(c, `msg="provisioner set unchanged: nothing to reload"`, `trigger="file changed"`)
	c.Check(isClosed(changed), gc.Equals, false)
	c.Check(current(w), gc.Equals, v1)
	c.Check(w.Report()["reloads"], gc.Equals, 0)
}

func (s *workerSuite) TestOtherFilesInTheDirectoryAreIgnored(c *gc.C) {
	w := s.start(c)
	c.Assert(os.WriteFile(filepath.Join(s.dir, "notes.txt"), []byte("x"), 0o644), gc.IsNil)
	s.replace(c, v2)
	// Had the other file's events armed the timer, the set's change would have re-armed it
	// and this advance would not reload.
	s.awaitTimer(c)
	s.clock.Advance(debounce)
	s.logs.wait(c, `msg="provisioner set reloaded`)
	c.Check(current(w), gc.Equals, v2)
	select {
	case <-s.clock.Alarms():
		c.Fatal("events of another file armed the debounce timer")
	default:
	}
}

func (s *workerSuite) TestChangeBeforeTheWatchIsNotMissed(c *gc.C) {
	c.Assert(os.WriteFile(s.path, []byte(v2), 0o644), gc.IsNil) // after the agent read v1
	w := s.newWorker(c, s.config())
	s.logs.wait(c, `msg="provisioner set reloaded`, "trigger=start")
	c.Check(current(w), gc.Equals, v2)
}

func (s *workerSuite) TestSetFromTheEnvironmentHasNothingToReload(c *gc.C) {
	config := s.config()
	config.Path = ""
	config.Origin = "BERTH_PROVISIONER_SET_JSON"
	w := s.newWorker(c, config)
	_, changed := w.Current()
	s.signals <- syscall.SIGHUP
	s.logs.wait(c, "comes from the environment", "nothing to reload", "use --provisioners FILE")
	c.Check(isClosed(changed), gc.Equals, false)
	c.Check(current(w), gc.Equals, v1)
}

func (s *workerSuite) TestInvalidInitialSetIsAnError(c *gc.C) {
	config := s.config()
	config.Initial = []byte(badSlot)
	_, err := provisionerset.NewWorker(config)
	c.Check(err, gc.ErrorMatches, `provisioner set from file .* is invalid: provisioner "pool" \(static\), line 1, column 86: runtimes\[0\]\.slots: must be at least 1.*`)
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for _, breakIt := range []func(*provisionerset.Config){
		func(cfg *provisionerset.Config) { cfg.Initial = nil },
		func(cfg *provisionerset.Config) { cfg.Origin = "" },
		func(cfg *provisionerset.Config) { cfg.Builder = nil },
		func(cfg *provisionerset.Config) { cfg.Debounce = 0 },
		func(cfg *provisionerset.Config) { cfg.Clock = nil },
		func(cfg *provisionerset.Config) { cfg.Logger = nil },
	} {
		cfg := s.config()
		breakIt(&cfg)
		c.Check(cfg.Validate(), gc.NotNil)
	}
	c.Check(s.config().Validate(), gc.IsNil)
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
	var seen []string
	for {
		select {
		case line := <-l.lines:
			seen = append(seen, line)
			if containsAll(line, parts) {
				return strings.TrimSuffix(line, "\n")
			}
		case <-deadline:
			c.Fatalf("no log line with %q; saw:\n%s", parts, strings.Join(seen, ""))
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// configMapVolume lays out and updates a directory as the kubelet's AtomicWriter does for a
// ConfigMap volume: each key is a symlink KEY -> ..data/KEY, ..data a symlink to a
// timestamped directory holding the files. An update writes a new timestamped directory,
// points a new symlink ..data_tmp at it, renames that over ..data and removes the old
// directory.
type configMapVolume struct {
	dir     string
	current string // the timestamped directory ..data points to
	updates int
}

func newConfigMapVolume(c *gc.C, files map[string]string) *configMapVolume {
	v := &configMapVolume{dir: c.MkDir()}
	v.update(c, files)
	for name := range files {
		c.Assert(os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)), gc.IsNil)
	}
	return v
}

func (v *configMapVolume) path(name string) string { return filepath.Join(v.dir, name) }

func (v *configMapVolume) update(c *gc.C, files map[string]string) {
	v.updates++
	tsDir, err := os.MkdirTemp(v.dir, fmt.Sprintf("..2026_12_01_19_00_%02d.", v.updates))
	c.Assert(err, gc.IsNil)
	for name, content := range files {
		c.Assert(os.WriteFile(filepath.Join(tsDir, name), []byte(content), 0o644), gc.IsNil)
	}
	tmpLink := filepath.Join(v.dir, "..data_tmp")
	c.Assert(os.Symlink(filepath.Base(tsDir), tmpLink), gc.IsNil)
	c.Assert(os.Rename(tmpLink, filepath.Join(v.dir, "..data")), gc.IsNil)
	if v.current != "" {
		c.Assert(os.RemoveAll(v.current), gc.IsNil)
	}
	v.current = tsDir
}

// TestConfigMapUpdateReloads: a set mounted from a ConfigMap is reloaded when Kubernetes
// swaps the volume's ..data symlink, once per update; an update that leaves the set's bytes
// as they were (another key changed) is no reload, and one to an invalid set keeps the
// running set and says why, as any invalid reload does.
func (s *workerSuite) TestConfigMapUpdateReloads(c *gc.C) {
	vol := newConfigMapVolume(c, map[string]string{"provisioners.json": v1, "notes.txt": "a"})
	s.path = vol.path("provisioners.json")
	w := s.start(c)

	for i, set := range []string{v2, v3} {
		_, changed := w.Current()
		vol.update(c, map[string]string{"provisioners.json": set, "notes.txt": "a"})
		s.awaitTimer(c)
		s.clock.Advance(debounce)
		waitClosed(c, changed, fmt.Sprintf("ConfigMap update %d", i+1))
		c.Check(current(w), gc.Equals, set)
		s.logs.wait(c, `msg="provisioner set reloaded: restarting the provisioners with it"`, `trigger="file changed"`)
	}
	c.Check(w.Report()["reloads"], gc.Equals, 2)

	_, changed := w.Current()
	vol.update(c, map[string]string{"provisioners.json": v3, "notes.txt": "b"})
	s.awaitTimer(c)
	s.clock.Advance(debounce)
	s.logs.wait(c, `msg="provisioner set unchanged: nothing to reload"`, `trigger="file changed"`)
	c.Check(isClosed(changed), gc.Equals, false)

	vol.update(c, map[string]string{"provisioners.json": badSlot, "notes.txt": "b"})
	s.awaitTimer(c)
	s.clock.Advance(debounce)
	line := s.logs.wait(c, `level=ERROR msg="provisioner set rejected: the agent keeps running the previous set"`)
	c.Check(line, gc.Matches, `.*err="provisioner set from file .*provisioners.json is invalid: provisioner \\"pool\\" \(static\), line 1, column 86: runtimes\[0\]\.slots: must be at least 1.*`)
	c.Check(isClosed(changed), gc.Equals, false)
	c.Check(current(w), gc.Equals, v3)
	c.Check(w.Report()["reloads"], gc.Equals, 2)
	c.Check(w.Report()["last-rejected"], gc.Matches, `.*runtimes\[0\]\.slots: must be at least 1.*`)

	// Each update armed the debounce timer once: the events that leave the set's file
	// resolving where it did (a timestamped directory made or removed, ..data_tmp made)
	// armed nothing. All of them, up to the last update's swap, were handled before its
	// reload, so an alarm they raised would still be waiting.
	select {
	case <-s.clock.Alarms():
		c.Fatal("an event that did not change the set's file armed the debounce timer")
	default:
	}
}
