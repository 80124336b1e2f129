package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/berth-dev/berth/environ"
)

// tracedContext returns a context carrying a recording span, the recorder of its provider,
// and the span, for the environ's spans to be children of.
func tracedContext(t *testing.T) (context.Context, *tracetest.SpanRecorder, trace.Span) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, parent := tp.Tracer("test").Start(t.Context(), "attempt")
	return ctx, rec, parent
}

func endedNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// The apply and the rollout wait are child spans of the caller's span, from its provider.
func TestApplyAndRolloutWaitAreChildSpans(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	ctx, rec, parent := tracedContext(t)

	if _, err := e.Reconcile(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: map[string]any{"slots": 1}}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	setDeploymentAvailable(t, cs, "rt-"+testPID)
	if err := e.AwaitReady(ctx, runtimeResource(testID)); err != nil {
		t.Fatalf("AwaitReady: %v", err)
	}
	parent.End()

	for _, name := range []string{SpanApply, SpanRolloutWait} {
		spans := endedNamed(rec, name)
		if len(spans) != 1 {
			t.Fatalf("%d %s spans, want 1", len(spans), name)
		}
		s := spans[0]
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("%s span's parent = %v, want the caller's span %v", name, s.Parent().SpanID(), parent.SpanContext().SpanID())
		}
		if got := attrOf(s, "berth.resource.id").AsString(); got != testID {
			t.Errorf("%s span's berth.resource.id = %q, want %q", name, got, testID)
		}
		if got := attrOf(s, "k8s.namespace.name").AsString(); got != "ns" {
			t.Errorf("%s span's k8s.namespace.name = %q, want ns", name, got)
		}
		if s.Status().Code != codes.Unset {
			t.Errorf("%s span's status = %v, want unset", name, s.Status())
		}
	}
	if got := attrOf(endedNamed(rec, SpanApply)[0], "berth.kubernetes.objects").AsInt64(); got < 1 {
		t.Errorf("apply span's berth.kubernetes.objects = %d, want the objects applied", got)
	}
	if got := attrOf(endedNamed(rec, SpanRolloutWait)[0], "berth.kubernetes.kind").AsString(); got != "deployment" {
		t.Errorf("rollout wait span's berth.kubernetes.kind = %q, want deployment", got)
	}
}

// A refused apply ends the apply span with the error the environ returns.
func TestFailedApplySpanHasErrorStatus(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	cs.PrependReactor("patch", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("admission webhook refused the service")
	})
	ctx, rec, parent := tracedContext(t)
	_, err := e.Reconcile(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: map[string]any{"slots": 1}})
	parent.End()
	if err == nil {
		t.Fatal("Reconcile succeeded, want the refused apply's error")
	}
	spans := endedNamed(rec, SpanApply)
	if len(spans) != 1 {
		t.Fatalf("%d apply spans, want 1", len(spans))
	}
	st := spans[0].Status()
	if st.Code != codes.Error || !strings.Contains(st.Description, "admission webhook refused the service") || !strings.Contains(err.Error(), st.Description) {
		t.Errorf("apply span's status = %+v, want the apply's error, part of %q", st, err.Error())
	}
}
