package provisioner

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/berth-dev/berth/environ"
)

// TracerName is the instrumentation scope of the worker's spans.
const TracerName = "github.com/berth-dev/berth/worker/provisioner"

// Span names: one SpanReconcile per attempt, with a child span for each environ call.
const (
	SpanReconcile          = "berth.reconcile"
	SpanEnvironReconcile   = "environ.Reconcile"
	SpanEnvironAwaitReady  = "environ.AwaitReady"
	SpanEnvironHibernate   = "environ.Hibernate"
	SpanEnvironDeprovision = "environ.Deprovision"
)

// Span attributes. Only what identifies the resource and how the attempt went: never its
// args, config or state.
const (
	AttrResourceID   = attribute.Key("berth.resource.id")
	AttrResourceType = attribute.Key("berth.resource.type")
	AttrGeneration   = attribute.Key("berth.resource.generation")
	AttrProvisioner  = attribute.Key("berth.provisioner")
	AttrEnvironType  = attribute.Key("berth.environ.type")
	// AttrOutcome is an Outcome*, or OutcomeNone.
	AttrOutcome = attribute.Key("berth.outcome")
)

// OutcomeNone is the outcome attribute of an attempt that did nothing to report (the
// resource up to date or paused, a retry not yet due, another agent's lease).
const OutcomeNone = "none"

// endSpan records on the attempt's span what the attempt found out about the resource and
// how it ended, then ends it. A failure's error is the span's status: brokers keep secrets
// out of their errors, and nothing of the resource's args or config is added to them.
func (a *attempt) endSpan(span trace.Span, o outcome) {
	result := o.result
	if result == "" {
		result = OutcomeNone
	}
	attrs := []attribute.KeyValue{AttrOutcome.String(result)}
	if a.r.Type != "" {
		attrs = append(attrs, AttrResourceType.String(string(a.r.Type)), AttrGeneration.Int64(a.r.Generation))
	}
	if a.provisioner != "" {
		attrs = append(attrs, AttrProvisioner.String(a.provisioner))
	}
	span.SetAttributes(attrs...)
	if a.failure != nil {
		span.RecordError(a.failure)
		span.SetStatus(codes.Error, a.failure.Error())
	}
	span.End()
}

// environSpan starts the child span of a call to env, under the attempt's context and
// bounded by it; end ends it with the call's error, if any, as its status.
func (a *attempt) environSpan(name string, env environ.Environ) (context.Context, func(error)) {
	ctx, span := a.w.tracer.Start(a.attemptCtx, name, trace.WithAttributes(
		AttrProvisioner.String(a.provisioner), AttrEnvironType.String(env.Type())))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
