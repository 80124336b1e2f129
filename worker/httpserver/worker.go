// Package httpserver is the agent's HTTP listener for operators and their tools: /healthz
// (the process is up), /readyz (the workers it names are running and none reports itself
// not ready, from the dependency engine's report), /metrics (Prometheus) and /debug/engine (the engine's report as JSON).
//
// It depends on nothing but the clock and the engine, so it keeps answering, with /readyz
// saying what is wrong, while the database or the environs are down.
package httpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strings"
	"time"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gopkg.in/tomb.v2"
)

// Reporter describes the agent's workers: the dependency engine is one. Its report has the
// engine's "manifolds", each with a "state" ("started" while its worker runs) and maybe an
// "error".
type Reporter interface {
	Report() map[string]any
}

// Config holds what the worker needs: its dependencies, and its Settings.
type Config struct {
	Reporter Reporter
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
	Clock    clock.Clock

	Settings
}

// Timeouts bound what a client can make the server wait for, so that slow or idle clients
// cannot hold connections (and their goroutines) open.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, headers and body.
	Read time.Duration
	// Handler bounds preparing an answer: a slower one (a stuck engine report or metrics
	// collector) is answered 503, saying so.
	Handler time.Duration
	// Write bounds the time from the end of a request's headers to the end of its answer. It
	// exceeds Handler, so that a slow answer gets its 503 rather than a cut connection.
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next request.
	Idle time.Duration
}

// DefaultTimeouts suit the endpoints: small GET requests, answers ready in well under a
// second, a scraper that keeps its connection open between scrapes (every 15 to 60 s).
var DefaultTimeouts = Timeouts{
	ReadHeader: 10 * time.Second,
	Read:       30 * time.Second,
	Handler:    30 * time.Second,
	Write:      60 * time.Second,
	Idle:       2 * time.Minute,
}

// withDefaults returns t with each zero field set to its default.
func (t Timeouts) withDefaults() Timeouts {
	for _, f := range []struct {
		field *time.Duration
		def   time.Duration
	}{
		{&t.ReadHeader, DefaultTimeouts.ReadHeader},
		{&t.Read, DefaultTimeouts.Read},
		{&t.Handler, DefaultTimeouts.Handler},
		{&t.Write, DefaultTimeouts.Write},
		{&t.Idle, DefaultTimeouts.Idle},
	} {
		if *f.field == 0 {
			*f.field = f.def
		}
	}
	return t
}

// Validate reports the first timeout that cannot work (NotValid).
func (t Timeouts) Validate() error {
	if t.ReadHeader < 0 || t.Read < 0 || t.Handler < 0 || t.Write < 0 || t.Idle < 0 {
		return errors.NotValidf("Timeouts %+v (must not be negative)", t)
	}
	if d := t.withDefaults(); d.Write <= d.Handler {
		return errors.NotValidf("Timeouts.Write %s (must exceed Timeouts.Handler %s, or a slow answer is cut off instead of answered 503)", d.Write, d.Handler)
	}
	return nil
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Reporter == nil:
		return errors.NotValidf("httpserver: nil Reporter")
	case c.Gatherer == nil:
		return errors.NotValidf("httpserver: nil Gatherer")
	case c.Logger == nil:
		return errors.NotValidf("httpserver: nil Logger")
	case c.Clock == nil:
		return errors.NotValidf("httpserver: nil Clock")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("httpserver: %w", err)
	}
	return nil
}

// ErrCannotListen is wrapped by NewWorker's error when the address cannot be listened on;
// the agent treats it as fatal rather than retrying a port that stays taken.
var ErrCannotListen = errors.New("cannot listen")

// Worker serves the agent's HTTP endpoints until it is killed.
type Worker struct {
	tomb     tomb.Tomb
	config   Config
	listener net.Listener
	server   *http.Server
}

// NewWorker listens on config.Addr at once, so that an address in use is an error here
// rather than later, and serves until killed.
func NewWorker(config Config) (*Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", config.Addr)
	if err != nil {
		return nil, fmt.Errorf("--http-addr %s: %w: %w: choose a free address, or stop what is using it", config.Addr, ErrCannotListen, err)
	}
	w := &Worker{config: config, listener: listener}
	timeouts := config.Timeouts.withDefaults()
	w.server = &http.Server{
		Handler: http.TimeoutHandler(w.routes(), timeouts.Handler,
			fmt.Sprintf("the answer took longer than %s (a stuck engine report or metrics collector): see the agent's log, and try again\n", timeouts.Handler)),
		ReadHeaderTimeout: timeouts.ReadHeader,
		ReadTimeout:       timeouts.Read,
		WriteTimeout:      timeouts.Write,
		IdleTimeout:       timeouts.Idle,
		ErrorLog:          slog.NewLogLogger(config.Logger.Handler(), slog.LevelWarn),
	}
	w.tomb.Go(w.loop)
	config.Logger.Info("serving health, metrics and engine report", "address", w.Addr())
	if !Loopback(config.Addr) {
		config.Logger.Warn("--http-addr is not a loopback address: /debug/engine and /metrics have no authentication and answer anyone who can reach it; "+
			"bind to 127.0.0.1 (--http-addr 127.0.0.1:9090) unless a firewall or an authenticating proxy guards the port", "address", w.Addr())
	}
	return w, nil
}

// Loopback reports whether the listen address addr (HOST:PORT) accepts connections from
// this machine only: a loopback IP (127.0.0.0/8, ::1) or localhost. An empty host, 0.0.0.0
// or :: listens on every interface, and any other name or IP may be reachable from elsewhere.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// NewManifoldWorker adapts NewWorker to ManifoldConfig.NewWorker.
func NewManifoldWorker(config Config) (worker.Worker, error) {
	return NewWorker(config)
}

// Addr is the address the worker listens on, with the port chosen when Addr's was 0.
func (w *Worker) Addr() string { return w.listener.Addr().String() }

// Kill asks the worker to stop: it stops accepting connections and lets requests in flight
// finish, for at most ShutdownTimeout.
func (w *Worker) Kill() { w.tomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *Worker) Wait() error { return w.tomb.Wait() }

// Report shows where the worker listens in the engine report.
func (w *Worker) Report() map[string]any {
	return map[string]any{"address": w.Addr()}
}

func (w *Worker) loop() error {
	served := make(chan error, 1)
	go func() { served <- w.server.Serve(w.listener) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve HTTP on %s: %w", w.Addr(), err)
	case <-w.tomb.Dying():
	}
	ctx, cancel := context.WithCancel(context.Background())
	timer := w.config.Clock.AfterFunc(w.config.ShutdownTimeout, cancel)
	defer timer.Stop()
	if err := w.server.Shutdown(ctx); err != nil {
		w.config.Logger.Warn("requests still running at shutdown were cut off", "timeout", w.config.ShutdownTimeout, "err", err)
		_ = w.server.Close()
	}
	// Serve has returned http.ErrServerClosed by now.
	<-served
	return nil
}

func (w *Worker) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", w.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.config.Gatherer, promhttp.HandlerOpts{
		// A failing collector (the database is slow) must not hide every other metric.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(w.config.Logger.Handler(), slog.LevelWarn),
	}))
	mux.HandleFunc("GET /debug/engine", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, http.StatusOK, w.config.Reporter.Report())
	})
	if w.config.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// readiness is /readyz's body.
type readiness struct {
	Ready     bool                      `json:"ready"`
	NotReady  []string                  `json:"not_ready,omitempty"` // the required workers not started, in Required's order
	Manifolds map[string]manifoldStatus `json:"manifolds"`
}

type manifoldStatus struct {
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// NotReadyKey is the key of a worker's own report whose value, a reason, makes /readyz count
// the worker's manifold not ready though it is started (a flag worker whose flag holds the
// agent's work back), with the reason as its error.
const NotReadyKey = "not-ready"

// readyz answers 200 when every required manifold is started and none of their workers
// reports itself not ready (NotReadyKey), else 503 saying which are not and why.
func (w *Worker) readyz(rw http.ResponseWriter, _ *http.Request) {
	manifolds, _ := w.config.Reporter.Report()["manifolds"].(map[string]any)
	body := readiness{Ready: true, Manifolds: make(map[string]manifoldStatus, len(w.config.Required))}
	for _, name := range w.config.Required {
		status := manifoldStatus{State: "missing"}
		notReady := ""
		if m, ok := manifolds[name].(map[string]any); ok {
			status.State, _ = m["state"].(string)
			status.Error, _ = m["error"].(string)
			if report, ok := m["report"].(map[string]any); ok {
				notReady, _ = report[NotReadyKey].(string)
			}
		}
		if notReady != "" && status.Error == "" {
			status.Error = notReady
		}
		body.Manifolds[name] = status
		if status.State != "started" || notReady != "" {
			body.Ready = false
			body.NotReady = append(body.NotReady, name)
		}
	}
	code := http.StatusOK
	if !body.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(rw, code, body)
}

func writeJSON(rw http.ResponseWriter, code int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(rw, "cannot encode the answer as JSON: "+err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_, _ = rw.Write(append(body, '\n')) // a write error means the client went away
}
