package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/environ"
)

// apply server-side applies d's objects in order, forcing Berth's ownership of the fields it
// sets, and records f on each; d.read then holds each object as written. Each apply of an
// object that exists is conditional on the version drift read (metadata.resourceVersion), so
// the fence is checked on what the apply replaces: an object written since is read again
// and checked again before the apply is retried, and one a later claim wrote is never
// overwritten (StaleWriteError).
func (e *kubeEnviron) apply(ctx context.Context, cs kubernetes.Interface, r *environ.Resource, d *desired, f fence) (err error) {
	ctx, end := startSpan(ctx, SpanApply, r, attribute.String("k8s.namespace.name", e.spec.Namespace), attribute.Int("berth.kubernetes.objects", len(d.objects)))
	defer func() { end(err) }()
	stamp := f.annotations()
	for _, obj := range d.objects {
		obj.SetAnnotations(merge(obj.GetAnnotations(), stamp))
		info, _ := kindOf(obj.GetAPIVersion(), obj.GetKind())
		key := objectKey(info.kind, obj.GetName())
		written, err := e.applyObject(ctx, info.client(cs, e.spec.Namespace), r, obj, d.read[key], f.generation)
		if err != nil {
			return err
		}
		d.read[key] = liveObject{obj: written}
	}
	e.logger.Debug("applied objects", "resource", r.ID, "objects", len(d.objects), "checksum", d.checksum)
	return nil
}

// applyConflictRetries bounds how often applyObject reads an object again after its
// conditional apply found it changed (a workload's status changes often during a rollout).
const applyConflictRetries = 5

// applyObject applies obj on the version of live, the object as last read, checking first
// that live carries no newer fence than the attempt's (generation and r.Lease), and returns
// the object as written.
func (e *kubeEnviron) applyObject(ctx context.Context, c objectClient, r *environ.Resource, obj *unstructured.Unstructured, live liveObject, generation int64) (metav1.Object, error) {
	what := fmt.Sprintf("apply of %s %s", strings.ToLower(obj.GetKind()), obj.GetName())
	for try := 0; ; try++ {
		obj.SetResourceVersion("")
		if !live.missing && live.obj != nil {
			if err := staleWrite(r, generation, fenceOf(live.obj), what); err != nil {
				return nil, e.refused(err)
			}
			obj.SetResourceVersion(live.obj.GetResourceVersion())
		}
		body, err := json.Marshal(obj.Object)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		written, err := c.apply(ctx, obj.GetName(), body)
		if err == nil {
			return written, nil
		}
		if !apierrors.IsConflict(err) || try == applyConflictRetries {
			return nil, fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		got, err := c.get(ctx, obj.GetName())
		switch {
		case apierrors.IsNotFound(err):
			live = liveObject{missing: true}
		case err != nil:
			return nil, fmt.Errorf("get %s %s: %w", obj.GetKind(), obj.GetName(), err)
		default:
			live = liveObject{obj: got}
		}
	}
}

// refused logs a write refused as stale, so that a resumed agent's refusals show in its own
// log, and returns err.
func (e *kubeEnviron) refused(err error) error {
	e.logger.Warn("refused a stale write to the cluster", "error", err)
	return err
}
