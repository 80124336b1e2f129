package httpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	"github.com/juju/worker/v4/workertest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/internal/logging"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/httpserver"
)

const (
	shutdownTimeout = 5 * time.Second
)

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeReporter serves a report tests change as they go. When blocking, Report waits for
// a token on release, so that a request can be held in flight.
type fakeReporter struct {
	mu       sync.Mutex
	report   map[string]any
	blocking bool
	entered  chan struct{}
	release  chan struct{}
}

func newFakeReporter(states map[string]string) *fakeReporter {
	r := &fakeReporter{entered: make(chan struct{}, 10), release: make(chan struct{})}
	r.set(states)
	return r
}

// set replaces the manifolds' states; a state "stopped" comes with an error.
func (r *fakeReporter) set(states map[string]string) {
	manifolds := map[string]any{}
	for name, state := range states {
		m := map[string]any{"state": state, "inputs": []string{"clock"}, "start-count": 1}
		if state != "started" {
			m["error"] = name + " is down"
		}
		manifolds[name] = m
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report = map[string]any{"state": "started", "manifolds": manifolds}
}

// setReport sets the report of the worker of manifold name.
func (r *fakeReporter) setReport(name string, report map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report["manifolds"].(map[string]any)[name].(map[string]any)["report"] = report
}

func (r *fakeReporter) block() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blocking = true
}

func (r *fakeReporter) Report() map[string]any {
	r.mu.Lock()
	report, blocking := r.report, r.blocking
	r.mu.Unlock()
	if blocking {
		r.entered <- struct{}{}
		<-r.release
	}
	return report
}

type workerSuite struct {
	clock    *testclock.Clock
	reporter *fakeReporter
	registry *prometheus.Registry
	logger   *slog.Logger
}

var _ = gc.Suite(&workerSuite{})

func (s *workerSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(epoch)
	s.reporter = newFakeReporter(map[string]string{"database": "started", "environs": "started", "clock": "started"})
	s.registry = prometheus.NewRegistry()
	requests := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_requests_total", Help: "Requests."})
	requests.Add(3)
	s.registry.MustRegister(requests)
	s.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (s *workerSuite) config() httpserver.Config {
	return httpserver.Config{
		Reporter: s.reporter,
		Gatherer: s.registry,
		Logger:   s.logger,
		Clock:    s.clock,
		Settings: httpserver.Settings{
			Addr:            "127.0.0.1:0",
			Required:        []string{"database", "environs"},
			ShutdownTimeout: shutdownTimeout,
		},
	}
}

func (s *workerSuite) start(c *gc.C) *httpserver.Worker {
	w, err := httpserver.NewWorker(s.config())
	c.Assert(err, gc.IsNil)
	return w
}

// get fetches path from w and returns the status code and body.
func get(c *gc.C, w *httpserver.Worker, path string) (int, string) {
	client := &http.Client{Timeout: testkit.LongWait}
	resp, err := client.Get("http://" + w.Addr() + path)
	c.Assert(err, gc.IsNil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	c.Assert(err, gc.IsNil)
	return resp.StatusCode, string(body)
}

func (s *workerSuite) TestHealthz(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(w.Addr(), gc.Matches, `127\.0\.0\.1:[1-9][0-9]*`)
	code, body := get(c, w, "/healthz")
	c.Check(code, gc.Equals, http.StatusOK)
	c.Check(body, gc.Equals, "{\n  \"status\": \"ok\"\n}\n")
}

func (s *workerSuite) TestReadyzFollowsTheReport(c *gc.C) {
	s.reporter.set(map[string]string{"database": "stopped", "environs": "starting", "clock": "started"})
	w := s.start(c)
	defer workertest.CleanKill(c, w)

	code, body := get(c, w, "/readyz")
	c.Check(code, gc.Equals, http.StatusServiceUnavailable)
	var got map[string]any
	c.Assert(json.Unmarshal([]byte(body), &got), gc.IsNil)
	c.Check(got, gc.DeepEquals, map[string]any{
		"ready":     false,
		"not_ready": []any{"database", "environs"},
		"manifolds": map[string]any{
			"database": map[string]any{"state": "stopped", "error": "database is down"},
			"environs": map[string]any{"state": "starting", "error": "environs is down"},
		},
	})

	s.reporter.set(map[string]string{"database": "started", "environs": "stopped", "clock": "started"})
	code, body = get(c, w, "/readyz")
	c.Check(code, gc.Equals, http.StatusServiceUnavailable)
	c.Check(body, gc.Matches, `(?s).*"not_ready": \[\s*"environs"\s*\].*`)

	s.reporter.set(map[string]string{"database": "started", "environs": "started", "clock": "stopped"})
	code, body = get(c, w, "/readyz")
	c.Check(code, gc.Equals, http.StatusOK) // clock is not required
	got = nil
	c.Assert(json.Unmarshal([]byte(body), &got), gc.IsNil)
	c.Check(got, gc.DeepEquals, map[string]any{
		"ready": true,
		"manifolds": map[string]any{
			"database": map[string]any{"state": "started"},
			"environs": map[string]any{"state": "started"},
		},
	})
}

// A started worker that reports itself not ready (a flag holding the agent's work back)
// makes /readyz 503, with its reason as the manifold's error.
func (s *workerSuite) TestReadyzFollowsAWorkersNotReadyReport(c *gc.C) {
	s.reporter.set(map[string]string{"database": "started", "environs": "started"})
	s.reporter.setReport("environs", map[string]any{httpserver.NotReadyKey: "the schema is too new", "known": 13})
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	code, body := get(c, w, "/readyz")
	c.Check(code, gc.Equals, http.StatusServiceUnavailable)
	var got map[string]any
	c.Assert(json.Unmarshal([]byte(body), &got), gc.IsNil)
	c.Check(got, gc.DeepEquals, map[string]any{
		"ready":     false,
		"not_ready": []any{"environs"},
		"manifolds": map[string]any{
			"database": map[string]any{"state": "started"},
			"environs": map[string]any{"state": "started", "error": "the schema is too new"},
		},
	})

	s.reporter.setReport("environs", map[string]any{httpserver.NotReadyKey: "", "known": 13})
	code, _ = get(c, w, "/readyz")
	c.Check(code, gc.Equals, http.StatusOK)
}

func (s *workerSuite) TestReadyzMissingManifold(c *gc.C) {
	s.reporter.set(map[string]string{"database": "started"})
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	code, body := get(c, w, "/readyz")
	c.Check(code, gc.Equals, http.StatusServiceUnavailable)
	c.Check(body, gc.Matches, `(?s).*"environs": \{\s*"state": "missing"\s*\}.*`)
}

func (s *workerSuite) TestMetrics(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	code, body := get(c, w, "/metrics")
	c.Check(code, gc.Equals, http.StatusOK)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	c.Assert(err, gc.IsNil)
	c.Assert(families["test_requests_total"], gc.NotNil)
	c.Check(families["test_requests_total"].GetMetric()[0].GetCounter().GetValue(), gc.Equals, 3.0)
}

func (s *workerSuite) TestDebugEngine(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	code, body := get(c, w, "/debug/engine")
	c.Check(code, gc.Equals, http.StatusOK)
	var got map[string]any
	c.Assert(json.Unmarshal([]byte(body), &got), gc.IsNil)
	want, err := json.Marshal(s.reporter.Report())
	c.Assert(err, gc.IsNil)
	var wantAny map[string]any
	c.Assert(json.Unmarshal(want, &wantAny), gc.IsNil)
	c.Check(got, gc.DeepEquals, wantAny)
	c.Check(got["manifolds"].(map[string]any)["database"].(map[string]any)["state"], gc.Equals, "started")
}

func (s *workerSuite) TestProfilesOnlyWhenAskedFor(c *gc.C) {
	w := s.start(c)
	code, _ := get(c, w, "/debug/pprof/heap")
	c.Check(code, gc.Equals, http.StatusNotFound)
	workertest.CleanKill(c, w)

	cfg := s.config()
	cfg.Profiling = true
	w, err := httpserver.NewWorker(cfg)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	code, body := get(c, w, "/debug/pprof/")
	c.Check(code, gc.Equals, http.StatusOK)
	c.Check(body, gc.Matches, `(?s).*goroutine.*heap.*`)
	code, body = get(c, w, "/debug/pprof/heap?debug=1")
	c.Check(code, gc.Equals, http.StatusOK)
	c.Check(body, gc.Matches, `(?s)heap profile:.*`)
}

func (s *workerSuite) TestOnlyGet(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	resp, err := http.Post("http://"+w.Addr()+"/healthz", "text/plain", nil)
	c.Assert(err, gc.IsNil)
	resp.Body.Close()
	c.Check(resp.StatusCode, gc.Equals, http.StatusMethodNotAllowed)
	code, _ := get(c, w, "/nothing-here")
	c.Check(code, gc.Equals, http.StatusNotFound)
}

func (s *workerSuite) TestKillClosesThePort(c *gc.C) {
	w := s.start(c)
	addr := w.Addr()
	code, _ := get(c, w, "/healthz")
	c.Check(code, gc.Equals, http.StatusOK)
	workertest.CleanKill(c, w)
	conn, err := net.Dial("tcp", addr)
	if err == nil {
		conn.Close()
	}
	c.Check(err, gc.ErrorMatches, ".*connection refused.*")
}

func (s *workerSuite) TestKillLetsARequestInFlightFinish(c *gc.C) {
	w := s.start(c)
	s.reporter.block()
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + w.Addr() + "/debug/engine")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	waitEntered(c, s.reporter)
	w.Kill()
	// Shutdown is waiting for the request, under its timeout.
	c.Assert(s.clock.WaitAdvance(0, testkit.LongWait, 1), gc.IsNil)
	s.reporter.release <- struct{}{}
	select {
	case code := <-answered:
		c.Check(code, gc.Equals, http.StatusOK)
	case <-time.After(testkit.LongWait):
		c.Fatalf("the request in flight was not answered")
	}
	c.Check(workertest.CheckKilled(c, w), gc.IsNil)
}

func (s *workerSuite) TestKillCutsOffARequestAfterTheTimeout(c *gc.C) {
	w := s.start(c)
	s.reporter.block()
	defer close(s.reporter.release) // let the stuck handler goroutine end
	go func() {
		resp, err := http.Get("http://" + w.Addr() + "/debug/engine")
		if err == nil {
			resp.Body.Close()
		}
	}()
	waitEntered(c, s.reporter)
	w.Kill()
	c.Assert(s.clock.WaitAdvance(shutdownTimeout, testkit.LongWait, 1), gc.IsNil)
	c.Check(workertest.CheckKilled(c, w), gc.IsNil)
}

func (s *workerSuite) TestBusyPortNamesTheFlag(c *gc.C) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	c.Assert(err, gc.IsNil)
	defer busy.Close()
	cfg := s.config()
	cfg.Addr = busy.Addr().String()
	w, err := httpserver.NewWorker(cfg)
	c.Check(w, gc.IsNil)
	c.Check(err, gc.ErrorMatches, `--http-addr 127\.0\.0\.1:[0-9]+: cannot listen: .*address already in use: choose a free address, or stop what is using it`)
	c.Check(errors.Is(err, httpserver.ErrCannotListen), gc.Equals, true)
}

func (s *workerSuite) TestReport(c *gc.C) {
	w := s.start(c)
	defer workertest.CleanKill(c, w)
	c.Check(w.Report(), gc.DeepEquals, map[string]any{"address": w.Addr()})
}

func (s *workerSuite) TestValidate(c *gc.C) {
	for i, t := range []struct {
		change func(*httpserver.Config)
		field  string
	}{
		{func(cfg *httpserver.Config) { cfg.Addr = "" }, "Addr .*--http-addr HOST:PORT"},
		{func(cfg *httpserver.Config) { cfg.Reporter = nil }, "Reporter"},
		{func(cfg *httpserver.Config) { cfg.Gatherer = nil }, "Gatherer"},
		{func(cfg *httpserver.Config) { cfg.Required = nil }, "Required .*/readyz"},
		{func(cfg *httpserver.Config) { cfg.Logger = nil }, "Logger"},
		{func(cfg *httpserver.Config) { cfg.Clock = nil }, "Clock"},
		{func(cfg *httpserver.Config) { cfg.ShutdownTimeout = 0 }, "ShutdownTimeout 0s .*positive"},
	} {
		c.Logf("test %d: %s", i, t.field)
		cfg := s.config()
		t.change(&cfg)
		testkit.CheckNotValid(c, cfg.Validate(), t.field)
		w, err := httpserver.NewWorker(cfg)
		c.Check(w, gc.IsNil)
		testkit.CheckNotValid(c, err, t.field)
	}
	c.Check(s.config().Validate(), gc.IsNil)
}

func (s *workerSuite) TestTimeoutsValidate(c *gc.C) {
	for i, t := range []struct {
		timeouts httpserver.Timeouts
		field    string
	}{
		{httpserver.Timeouts{Idle: -time.Second}, "Timeouts .* \\(must not be negative\\)"},
		{httpserver.Timeouts{Handler: time.Minute, Write: time.Minute}, `Timeouts.Write 1m0s \(must exceed Timeouts.Handler 1m0s, or a slow answer is cut off instead of answered 503\)`},
		{httpserver.Timeouts{Handler: 2 * time.Minute}, `Timeouts.Write 1m0s \(must exceed Timeouts.Handler 2m0s.*`},
	} {
		c.Logf("test %d: %+v", i, t.timeouts)
		cfg := s.config()
		cfg.Timeouts = t.timeouts
		testkit.CheckNotValid(c, cfg.Validate(), t.field)
	}
	c.Check(httpserver.Timeouts{}.Validate(), gc.IsNil)
	c.Check(httpserver.DefaultTimeouts.Validate(), gc.IsNil)
}

// An answer that takes longer than the handler timeout is a 503 saying so, not a connection
// cut off by the write timeout.
func (s *workerSuite) TestSlowAnswerIsA503(c *gc.C) {
	cfg := s.config()
	cfg.Timeouts = httpserver.Timeouts{Handler: 20 * time.Millisecond}
	w, err := httpserver.NewWorker(cfg)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	s.reporter.block()
	defer close(s.reporter.release) // let the stuck handler goroutine end
	code, body := get(c, w, "/debug/engine")
	c.Check(code, gc.Equals, http.StatusServiceUnavailable)
	c.Check(body, gc.Matches, `the answer took longer than 20ms .*try again\n`)
}

// A kept-alive connection with no next request is closed after the idle timeout.
func (s *workerSuite) TestIdleConnectionIsClosed(c *gc.C) {
	cfg := s.config()
	cfg.Timeouts = httpserver.Timeouts{Idle: 20 * time.Millisecond}
	w, err := httpserver.NewWorker(cfg)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	conn := dial(c, w)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: berth\r\n\r\n")
	c.Assert(err, gc.IsNil)
	reader := bufio.NewReader(conn)
	resp, err := http.ReadResponse(reader, nil)
	c.Assert(err, gc.IsNil)
	_, err = io.Copy(io.Discard, resp.Body)
	c.Assert(err, gc.IsNil)
	c.Check(resp.StatusCode, gc.Equals, http.StatusOK)
	c.Check(resp.Close, gc.Equals, false)
	_, err = reader.ReadByte()
	c.Check(err, gc.Equals, io.EOF)
}

// A client that never finishes its request headers is cut off after the header timeout.
func (s *workerSuite) TestUnfinishedHeadersAreCutOff(c *gc.C) {
	cfg := s.config()
	cfg.Timeouts = httpserver.Timeouts{ReadHeader: 20 * time.Millisecond}
	w, err := httpserver.NewWorker(cfg)
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	conn := dial(c, w)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: berth\r\n")
	c.Assert(err, gc.IsNil)
	rest, err := io.ReadAll(conn)
	c.Check(err, gc.IsNil)
	c.Check(string(rest), gc.Equals, "")
}

func (s *workerSuite) TestLoopback(c *gc.C) {
	for _, t := range []struct {
		addr     string
		loopback bool
	}{
		{"127.0.0.1:9090", true},
		{"127.0.0.2:9090", true},
		{"[::1]:9090", true},
		{"localhost:9090", true},
		{"LOCALHOST:9090", true},
		{"0.0.0.0:9090", false},
		{"[::]:9090", false},
		{":8080", false},
		{"203.0.113.7:9090", false},
		{"[2001:db8::1]:9090", false},
		{"10.0.0.5:9090", false},
		{"berth.example.com:9090", false},
		{"not an address", false},
	} {
		c.Check(httpserver.Loopback(t.addr), gc.Equals, t.loopback, gc.Commentf("%s", t.addr))
	}
}

// An address others can reach gets one warning at start saying the endpoints have no
// authentication and how to bind to loopback; a loopback one gets none.
func (s *workerSuite) TestWarnsWhenListeningBeyondLoopback(c *gc.C) {
	for _, t := range []struct {
		addr  string
		warns bool
	}{{"127.0.0.1:0", false}, {"0.0.0.0:0", true}} {
		var logs bytes.Buffer
		cfg := s.config()
		cfg.Addr = t.addr
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		w, err := httpserver.NewWorker(cfg)
		c.Assert(err, gc.IsNil)
		workertest.CleanKill(c, w)
		warnings := regexp.MustCompile(`(?m)^.*level=WARN.*$`).FindAllString(logs.String(), -1)
		if !t.warns {
			c.Check(warnings, gc.HasLen, 0, gc.Commentf("%s", t.addr))
			continue
		}
		c.Assert(warnings, gc.HasLen, 1, gc.Commentf("%s: %s", t.addr, logs.String()))
		c.Check(warnings[0], gc.Matches, `.*not a loopback address.*/debug/engine.*no authentication.*--http-addr 127\.0\.0\.1:9090.*`)
	}
}

func dial(c *gc.C, w *httpserver.Worker) net.Conn {
	conn, err := net.DialTimeout("tcp", w.Addr(), testkit.LongWait)
	c.Assert(err, gc.IsNil)
	c.Assert(conn.SetDeadline(time.Now().Add(testkit.LongWait)), gc.IsNil)
	return conn
}

// TestInARealEngine runs the manifold beside dependency.SelfManifold, as the agent does:
// /debug/engine is the engine's own report and /readyz follows its manifolds.
func (s *workerSuite) TestInARealEngine(c *gc.C) {
	engine, err := dependency.NewEngine(dependency.EngineConfig{
		IsFatal:          func(error) bool { return false },
		WorstError:       func(err0, _ error) error { return err0 },
		ErrorDelay:       time.Second,
		BounceDelay:      time.Millisecond,
		BackoffFactor:    2,
		BackoffResetTime: time.Minute,
		MaxDelay:         time.Minute,
		// The engine's own delays (a bounce while inputs start) run on the wall clock; the
		// worker under test gets the test clock from the clock manifold.
		Clock:   clock.WallClock,
		Metrics: dependency.DefaultMetrics(),
		Logger:  logging.EngineLogger{Logger: s.logger},
	})
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, engine)

	addrs := make(chan string, 1)
	c.Assert(dependency.Install(engine, dependency.Manifolds{
		"clock":  clockManifold(s.clock),
		"engine": dependency.SelfManifold(engine),
		"http": httpserver.Manifold(httpserver.ManifoldConfig{
			ClockName:  "clock",
			EngineName: "engine",
			Gatherer:   s.registry,
			Settings: httpserver.Settings{
				Addr:            "127.0.0.1:0",
				Required:        []string{"database"},
				ShutdownTimeout: shutdownTimeout,
			},
			Logger: s.logger,
			NewWorker: func(cfg httpserver.Config) (worker.Worker, error) {
				w, err := httpserver.NewWorker(cfg)
				if err == nil {
					addrs <- w.Addr()
				}
				return w, err
			},
		}),
	}), gc.IsNil)

	var addr string
	select {
	case addr = <-addrs:
	case <-time.After(testkit.LongWait):
		c.Fatalf("the HTTP worker did not start")
	}
	code, body := getURL(c, "http://"+addr+"/readyz")
	c.Check(code, gc.Equals, http.StatusServiceUnavailable)
	c.Check(body, gc.Matches, `(?s).*"database": \{\s*"state": "missing"\s*\}.*`)

	c.Assert(engine.Install("database", idleManifold()), gc.IsNil)
	testkit.Eventually(c, testkit.Holds("database started", func() bool {
		code, _ := getURL(c, "http://"+addr+"/readyz")
		return code == http.StatusOK
	}))

	// The server answers before the engine has recorded its worker as started: the engine
	// notes a start only once the worker is back from its manifold's Start.
	var report struct {
		State     string                    `json:"state"`
		Manifolds map[string]map[string]any `json:"manifolds"`
	}
	testkit.Eventually(c, testkit.Holds("the engine's report of the http worker as started", func() bool {
		code, body := getURL(c, "http://"+addr+"/debug/engine")
		c.Assert(code, gc.Equals, http.StatusOK)
		c.Assert(json.Unmarshal([]byte(body), &report), gc.IsNil)
		return report.Manifolds["http"]["state"] == "started"
	}))
	c.Check(report.State, gc.Equals, "started")
	c.Check(report.Manifolds["http"]["state"], gc.Equals, "started")
	c.Check(report.Manifolds["http"]["inputs"], gc.DeepEquals, []any{"clock", "engine"})
	c.Check(report.Manifolds["http"]["start-count"], gc.Equals, 1.0)
	c.Check(report.Manifolds["http"]["report"], gc.DeepEquals, map[string]any{"address": addr})
	c.Check(report.Manifolds["database"]["state"], gc.Equals, "started")
}

// clockManifold outputs clk, as the agent's clock manifold does.
func clockManifold(clk clock.Clock) dependency.Manifold {
	m := idleManifold()
	m.Output = func(_ worker.Worker, out any) error {
		clkOut, ok := out.(*clock.Clock)
		if !ok {
			return fmt.Errorf("clock manifold: cannot output into %T", out)
		}
		*clkOut = clk
		return nil
	}
	return m
}

// idleManifold runs a worker that only waits to be killed: an input that is up.
func idleManifold() dependency.Manifold {
	return dependency.Manifold{
		Start: func(context.Context, dependency.Getter) (worker.Worker, error) {
			return workertest.NewErrorWorker(nil), nil
		},
	}
}

func getURL(c *gc.C, url string) (int, string) {
	client := &http.Client{Timeout: testkit.LongWait}
	resp, err := client.Get(url)
	c.Assert(err, gc.IsNil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	c.Assert(err, gc.IsNil)
	return resp.StatusCode, string(body)
}

func waitEntered(c *gc.C, r *fakeReporter) {
	select {
	case <-r.entered:
	case <-time.After(testkit.LongWait):
		c.Fatalf("no request reached the reporter")
	}
}
