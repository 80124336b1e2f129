package provisioner_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/juju/worker/v4/workertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/internal/tracing"
	"github.com/berth-dev/berth/worker/provisioner"
)

// spanRecorder records ended spans and says when one ends.
type spanRecorder struct {
	*tracetest.SpanRecorder
	ended chan struct{}
}

func newSpanRecorder() *spanRecorder {
	return &spanRecorder{SpanRecorder: tracetest.NewSpanRecorder(), ended: make(chan struct{}, 100)}
}

func (r *spanRecorder) OnEnd(s sdktrace.ReadOnlySpan) {
	r.SpanRecorder.OnEnd(s)
	select {
	case r.ended <- struct{}{}:
	default:
	}
}

// tracedConfig is the suite's config with a tracer provider recording into the returned
// recorder.
func (s *workerSuite) tracedConfig() (provisioner.Config, *spanRecorder) {
	rec := newSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	cfg := s.config()
	cfg.TracerProvider = tp
	return cfg, rec
}

// waitAttempts waits until n attempt spans have ended and returns them.
func (r *spanRecorder) waitAttempts(c *gc.C, n int) []sdktrace.ReadOnlySpan {
	timeout := time.After(testkit.LongWait)
	for {
		attempts := r.named(provisioner.SpanReconcile)
		if len(attempts) >= n {
			return attempts
		}
		select {
		case <-r.ended:
		case <-timeout:
			c.Fatalf("timed out waiting for %d attempt spans, got %d", n, len(attempts))
		}
	}
}

func (r *spanRecorder) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]any {
	out := map[attribute.Key]any{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value.AsInterface()
	}
	return out
}

// A reconcile to ready is one attempt span, with the environ's calls as its children and
// its log lines carrying its trace and span ids.
func (s *workerSuite) TestReconcileToReadyIsOneSpanWithEnvironChildren(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1", Args: map[string]any{"slots": 2, "token": "s3cret"}})
	cfg, rec := s.tracedConfig()
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
	attempts := rec.waitAttempts(c, 1)
	c.Assert(attempts, gc.HasLen, 1)
	attempt := attempts[0]
	c.Check(spanAttrs(attempt), gc.DeepEquals, map[attribute.Key]any{
		provisioner.AttrResourceID:   "r1",
		provisioner.AttrResourceType: "runtime",
		provisioner.AttrGeneration:   int64(1),
		provisioner.AttrProvisioner:  "pool",
		provisioner.AttrOutcome:      provisioner.OutcomeReady,
	})
	c.Check(attempt.Status().Code, gc.Equals, codes.Unset)
	c.Check(attempt.Parent().IsValid(), gc.Equals, false) // a root span

	var children []string
	for _, span := range rec.Ended() {
		if span.Name() == provisioner.SpanReconcile {
			continue
		}
		children = append(children, span.Name())
		c.Check(span.Parent().SpanID(), gc.Equals, attempt.SpanContext().SpanID(), gc.Commentf("span %s", span.Name()))
		c.Check(span.SpanContext().TraceID(), gc.Equals, attempt.SpanContext().TraceID(), gc.Commentf("span %s", span.Name()))
		c.Check(spanAttrs(span)[provisioner.AttrEnvironType], gc.Equals, "fake")
		c.Check(span.Status().Code, gc.Equals, codes.Unset)
	}
	c.Check(children, gc.DeepEquals, []string{provisioner.SpanEnvironReconcile, provisioner.SpanEnvironAwaitReady})
	for _, span := range rec.Ended() {
		for _, kv := range span.Attributes() {
			c.Check(strings.Contains(kv.Value.String(), "s3cret"), gc.Equals, false, gc.Commentf("span %s attribute %s", span.Name(), kv.Key))
		}
	}

	ids := "trace_id=" + attempt.SpanContext().TraceID().String() + " span_id=" + attempt.SpanContext().SpanID().String()
	var lines int
	for _, line := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(line, "id=r1") {
			lines++
			c.Check(strings.Contains(line, ids), gc.Equals, true, gc.Commentf("log line %q", line))
		}
	}
	c.Check(lines >= 2, gc.Equals, true, gc.Commentf("logs:\n%s", s.logs.String())) // provisioning, ready
}

// A failed attempt's span has the error as its status and the retry outcome, as has the
// child span of the environ call that failed.
func (s *workerSuite) TestFailedAttemptSpanHasErrorStatus(c *gc.C) {
	s.state.add(domain.Resource{ID: "r1"})
	s.env.script("reconcile", errorString("host busy"))
	cfg, rec := s.tracedConfig()
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	attempt := rec.waitAttempts(c, 1)[0]
	c.Check(spanAttrs(attempt)[provisioner.AttrOutcome], gc.Equals, provisioner.OutcomeRetry)
	c.Check(attempt.Status(), gc.DeepEquals, sdktrace.Status{Code: codes.Error, Description: "reconcile: host busy"})
	c.Check(attempt.Events(), gc.HasLen, 1) // the error, recorded
	children := rec.named(provisioner.SpanEnvironReconcile)
	c.Assert(children, gc.HasLen, 1)
	c.Check(children[0].Status(), gc.DeepEquals, sdktrace.Status{Code: codes.Error, Description: "host busy"})
	c.Check(rec.named(provisioner.SpanEnvironAwaitReady), gc.HasLen, 0)
}

type errorString string

func (e errorString) Error() string { return string(e) }

// Spans exported to an endpoint that refuses connections neither block nor fail reconciles:
// each generation's attempt ends, and the next one starts, whatever the exports do.
func (s *workerSuite) TestRefusingCollectorDoesNotHoldUpReconciles(c *gc.C) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	c.Assert(err, gc.IsNil)
	refused := l.Addr().String()
	c.Assert(l.Close(), gc.IsNil)
	s.checkReconcilesWithCollector(c, refused)
}

// Nor does a collector that takes connections and never answers: an export waits for its
// timeout, off the reconciles' path.
func (s *workerSuite) TestSilentCollectorDoesNotHoldUpReconciles(c *gc.C) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // never accepted: connections wait in its backlog
	c.Assert(err, gc.IsNil)
	defer l.Close()
	s.checkReconcilesWithCollector(c, l.Addr().String())
}

func (s *workerSuite) checkReconcilesWithCollector(c *gc.C, addr string) {
	defer setenv(c, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr,
		// Export every span at once, and keep no more than one queued.
		"OTEL_BSP_SCHEDULE_DELAY":        "1",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1",
		"OTEL_BSP_MAX_QUEUE_SIZE":        "1",
	})()
	p, err := tracing.Setup(context.Background(), tracing.Options{Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	c.Assert(err, gc.IsNil)
	c.Assert(p.Exporting, gc.Equals, true)
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing answers: give up flushing at once
		_ = p.Shutdown(ctx)
	}()

	s.state.add(domain.Resource{ID: "r1", Args: map[string]any{"slots": 1}})
	cfg := s.config()
	cfg.TracerProvider = p
	w := s.start(c, cfg)
	defer workertest.CleanKill(c, w)

	s.watcher.send(c, "r1")
	s.state.waitRow(c, "r1", "ready", ready(1))
	for gen := int64(2); gen <= 4; gen++ {
		// The new generation is reconciled once the last attempt has ended, span and all.
		s.state.updateArgs("r1", map[string]any{"slots": gen})
		s.watcher.send(c, "r1")
		s.state.waitRow(c, "r1", "ready", ready(gen))
	}
}

// setenv sets the variables; the function it returns puts back what they were (gocheck runs
// a suite's tests one at a time).
func setenv(c *gc.C, vars map[string]string) (restore func()) {
	var undo []func()
	for name, value := range vars {
		old, had := os.LookupEnv(name)
		c.Assert(os.Setenv(name, value), gc.IsNil)
		undo = append(undo, func() {
			if had {
				_ = os.Setenv(name, old)
			} else {
				_ = os.Unsetenv(name)
			}
		})
	}
	return func() {
		for _, f := range undo {
			f()
		}
	}
}
