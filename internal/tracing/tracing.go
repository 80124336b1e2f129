// Package tracing sets up the agent's OpenTelemetry tracer provider from the standard
// OTEL_* environment variables.
//
// Traces are off unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set: the provider is then the no-op one, and spans cost nothing. When an endpoint is set,
// spans are exported over OTLP (HTTP/protobuf by default, gRPC when OTEL_EXPORTER_OTLP_PROTOCOL
// or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL says "grpc") through a batch span processor: a slow
// or unreachable collector drops spans once the queue is full, and never holds up the work
// being traced. Everything else (headers, timeouts, TLS, sampling, batching, resource
// attributes) is read by the OpenTelemetry SDK itself, as its documentation describes.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the service.name of the agent's spans unless OTEL_SERVICE_NAME (or
// service.name in OTEL_RESOURCE_ATTRIBUTES) names another.
const ServiceName = "berth"

// Options are what Setup needs besides the environment.
type Options struct {
	Version string       // the agent's version, as service.version
	Logger  *slog.Logger // export failures are logged here
}

// Provider is the agent's tracer provider and how to flush it.
type Provider struct {
	trace.TracerProvider
	// Shutdown exports the spans still queued and stops the exporter. It gives up when ctx
	// ends, so that a collector that does not answer cannot hold up the agent's exit.
	Shutdown func(ctx context.Context) error
	// Exporting says spans are exported: an OTLP endpoint is set.
	Exporting bool
}

// Setup returns the tracer provider the environment asks for: the no-op one unless an OTLP
// endpoint is set, else an SDK provider exporting over OTLP. It does not connect: an
// unreachable collector is no error here, only failed exports later, which the global
// OpenTelemetry error handler it sets logs on opts.Logger.
func Setup(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Logger == nil {
		return nil, errors.New("tracing: Logger is required")
	}
	if !exportRequested() {
		return &Provider{TracerProvider: noop.NewTracerProvider(), Shutdown: func(context.Context) error { return nil }}, nil
	}
	exporter, err := newExporter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(opts.Version)),
		// Last, so that OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the defaults.
		resource.WithFromEnv(),
	)
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES still yields the attributes that parsed.
		opts.Logger.Warn("tracing: some resource attributes from the environment were not used", "error", err)
	}
	logger := opts.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: cannot export spans", "error", err)
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return &Provider{TracerProvider: tp, Shutdown: tp.Shutdown, Exporting: true}, nil
}

// exportRequested reports whether the environment sets an OTLP endpoint for traces and does
// not turn the SDK or the traces exporter off.
func exportRequested() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// newExporter returns the OTLP exporter of the protocol the environment names; the
// exporter reads the endpoint, headers, timeout, compression and TLS settings itself.
func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	name, protocol := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		name, protocol = "OTEL_EXPORTER_OTLP_PROTOCOL", os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch strings.TrimSpace(protocol) {
	case "", "http/protobuf":
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP/HTTP exporter: %w", err)
		}
		return exp, nil
	case "grpc":
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP/gRPC exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("tracing: %s=%q is not supported: set it to http/protobuf or grpc, or unset it", name, protocol)
	}
}
