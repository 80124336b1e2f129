package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/berth-dev/berth/internal/tracing"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// unsetAll clears the variables Setup reads, for the test's duration.
func unsetAll(t *testing.T) {
	for _, name := range []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	} {
		t.Setenv(name, "")
	}
}

func TestNoEndpointIsTheNoopProvider(t *testing.T) {
	unsetAll(t)
	p, err := tracing.Setup(t.Context(), tracing.Options{Version: "v1.2.3", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.TracerProvider.(noop.TracerProvider); !ok || p.Exporting {
		t.Errorf("provider without an endpoint = %T (exporting %v), want the no-op one", p.TracerProvider, p.Exporting)
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

func TestTurnedOffIsTheNoopProvider(t *testing.T) {
	for _, off := range []struct{ name, value string }{
		{"OTEL_SDK_DISABLED", "true"},
		{"OTEL_TRACES_EXPORTER", "none"},
	} {
		t.Run(off.name, func(t *testing.T) {
			unsetAll(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
			t.Setenv(off.name, off.value)
			p, err := tracing.Setup(t.Context(), tracing.Options{Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := p.TracerProvider.(noop.TracerProvider); !ok {
				t.Errorf("provider with %s=%s = %T, want the no-op one", off.name, off.value, p.TracerProvider)
			}
		})
	}
}

// spanResource ends one span of p's and returns its resource's attributes.
func spanResource(t *testing.T, p *tracing.Provider) map[attribute.Key]string {
	t.Helper()
	sdk, ok := p.TracerProvider.(*sdktrace.TracerProvider)
	if !ok {
		t.Fatalf("provider with an endpoint = %T, want the SDK's", p.TracerProvider)
	}
	rec := tracetest.NewSpanRecorder()
	sdk.RegisterSpanProcessor(rec)
	_, span := sdk.Tracer("test").Start(t.Context(), "probe")
	span.End()
	out := map[attribute.Key]string{}
	for _, kv := range rec.Ended()[0].Resource().Attributes() {
		out[kv.Key] = kv.Value.String()
	}
	return out
}

func shutdownNow(t *testing.T, p *tracing.Provider) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // nothing listens: flushing is given up at once
	_ = p.Shutdown(ctx)
}

func TestEndpointExportsWithServiceNameAndVersion(t *testing.T) {
	for _, env := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Run(env, func(t *testing.T) {
			unsetAll(t)
			t.Setenv(env, "http://127.0.0.1:4318")
			p, err := tracing.Setup(t.Context(), tracing.Options{Version: "v1.2.3", Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			defer shutdownNow(t, p)
			if !p.Exporting {
				t.Error("Exporting = false with an endpoint set")
			}
			res := spanResource(t, p)
			if res["service.name"] != "berth" || res["service.version"] != "v1.2.3" {
				t.Errorf("resource = %v, want service.name berth and service.version v1.2.3", res)
			}
		})
	}
}

func TestEnvironmentOverridesTheServiceName(t *testing.T) {
	unsetAll(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_SERVICE_NAME", "berth-eu")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=prod")
	p, err := tracing.Setup(t.Context(), tracing.Options{Version: "v1.2.3", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdownNow(t, p)
	res := spanResource(t, p)
	if res["service.name"] != "berth-eu" || res["deployment.environment.name"] != "prod" {
		t.Errorf("resource = %v, want OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES honoured", res)
	}
}

func TestUnknownProtocolIsAClearError(t *testing.T) {
	unsetAll(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
	_, err := tracing.Setup(t.Context(), tracing.Options{Logger: discard})
	if err == nil || !strings.Contains(err.Error(), `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json" is not supported`) {
		t.Errorf("Setup with protocol http/json = %v, want an error naming the variable", err)
	}
}

// With an endpoint set, spans reach the collector over OTLP/HTTP by the time Shutdown
// returns, with the agent's service name and version.
func TestSpansAreExportedAndFlushedOnShutdown(t *testing.T) {
	requests := make(chan *coltracepb.ExportTraceServiceRequest, 10)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		requests <- req
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer collector.Close()
	unsetAll(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)

	p, err := tracing.Setup(t.Context(), tracing.Options{Version: "v1.2.3", Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer("test").Start(t.Context(), "berth.reconcile")
	span.End()
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	select {
	case req := <-requests:
		rs := req.GetResourceSpans()
		if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || len(rs[0].GetScopeSpans()[0].GetSpans()) != 1 {
			t.Fatalf("export = %v, want the one span", req)
		}
		if name := rs[0].GetScopeSpans()[0].GetSpans()[0].GetName(); name != "berth.reconcile" {
			t.Errorf("exported span %q, want berth.reconcile", name)
		}
		var service string
		for _, kv := range rs[0].GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		if service != "berth" {
			t.Errorf("exported service.name = %q, want berth", service)
		}
	default:
		t.Fatal("Shutdown returned before the span was exported")
	}
}
