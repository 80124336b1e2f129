package logging_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/berth-dev/berth/internal/logging"
)

func TestWithSpanAddsTheSpansIDs(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(t.Context(), "attempt")
	defer span.End()

	logging.WithSpan(ctx, logger).Info("provisioning")
	sc := span.SpanContext()
	for _, want := range []string{"trace_id=" + sc.TraceID().String(), "span_id=" + sc.SpanID().String()} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log line %q lacks %s", buf.String(), want)
		}
	}
}

func TestWithSpanWithoutASpanAddsNothing(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	if got := logging.WithSpan(t.Context(), logger); got != logger {
		t.Error("WithSpan without a span returned another logger")
	}
}
