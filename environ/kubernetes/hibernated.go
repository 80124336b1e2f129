package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
)

// keepHibernated scales back to zero every workload of owned that Hibernate scaled to zero
// (AnnotationHibernated) and that has replicas again while its resource is hibernated (and
// not paused): something other than Berth's wake woke it (a wake renders the workload
// without the annotation, in the apply that gives it replicas). Each scale-down is
// conditional on the workload as listed, so one a wake changed since is left alone, and is
// logged with who woke it. It returns the problems it met.
func (e *kubeEnviron) keepHibernated(ctx context.Context, cs kubernetes.Interface, owned []ownedObject) []string {
	var problems []string
	for _, o := range owned {
		if o.obj.GetAnnotations()[AnnotationHibernated] != "true" || o.obj.GetDeletionTimestamp() != nil || workloadReplicas(o.obj) == 0 {
			continue
		}
		id := o.obj.GetLabels()[LabelResourceID]
		row, err := e.resources.GetResource(ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			continue // an orphan: the sweep deletes it
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("look up hibernated resource %s: %v", id, err))
			continue
		}
		if row.Status != domain.StatusHibernated || !row.Hibernate || row.Paused {
			continue
		}
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": o.obj.GetResourceVersion()},
			"spec":     map[string]any{"replicas": 0},
		})
		if err != nil {
			return append(problems, err.Error())
		}
		err = o.kind.client(cs, e.spec.Namespace).patch(ctx, o.obj.GetName(), body)
		switch {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			continue // changed since it was listed: the next check looks again
		case err != nil:
			problems = append(problems, fmt.Sprintf("scale %s of hibernated resource %s back to zero: %v", o, id, err))
			continue
		}
		e.logger.Warn("hibernated resource found running; scaled back to zero", "resource", id, "object", o.String(),
			"replicas", workloadReplicas(o.obj), "woken-by", wokenBy(o.obj))
	}
	return problems
}

// workloadReplicas is the replicas a Deployment or StatefulSet asks for; 0 for other kinds.
func workloadReplicas(obj metav1.Object) int32 {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return replicas(w.Spec.Replicas)
	case *appsv1.StatefulSet:
		return replicas(w.Spec.Replicas)
	}
	return 0
}

// wokenBy says who set obj's replicas last, from its managed fields: the field manager that
// owns spec.replicas (with the subresource it wrote through, e.g. scale), or Berth's own
// manager with the lease holder the object records. Without managed fields it says only
// that the workload was found running.
func wokenBy(obj metav1.Object) string {
	var who string
	var when metav1.Time
	for _, m := range obj.GetManagedFields() {
		if m.FieldsV1 == nil || !ownsReplicas(m.FieldsV1.GetRawBytes()) {
			continue
		}
		if who != "" && m.Time != nil && m.Time.Before(&when) {
			continue
		}
		who = m.Manager
		if m.Subresource != "" {
			who += " (through " + m.Subresource + ")"
		}
		if m.Manager == fieldManager {
			who += ", lease holder " + holderName(fenceOf(obj).holder)
		}
		if m.Time != nil {
			when = *m.Time
		}
	}
	if who == "" {
		return "unknown: found running"
	}
	return who
}

// ownsReplicas reports whether the managed fields raw (fieldsV1) include spec.replicas.
func ownsReplicas(raw []byte) bool {
	var fields struct {
		Spec map[string]json.RawMessage `json:"f:spec"`
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return false
	}
	_, ok := fields.Spec["f:replicas"]
	return ok
}

// sweepQuota releases the slot-quota reservations whose resource row no longer exists (a
// row removed without deprovisioning), a page per check. It returns the problems it met.
func (e *kubeEnviron) sweepQuota(ctx context.Context) []string {
	summary, ok := e.slots.(domain.SlotSummary)
	if e.spec.SlotQuota <= 0 || !ok {
		return nil
	}
	orphans, err := summary.OrphanedReservations(ctx, e.name, "", orphanPage)
	if err != nil {
		return []string{fmt.Sprintf("look up orphaned slot reservations: %v", err)}
	}
	var problems []string
	for _, o := range orphans {
		e.logger.Info("releasing the slots of a resource that no longer exists", "resource", o.ResourceID, "slots", o.Slots)
		if err := e.slots.ReleaseSlots(ctx, e.name, o.ResourceID, nil); err != nil {
			problems = append(problems, fmt.Sprintf("release slots of deleted resource %s: %v", o.ResourceID, err))
		}
	}
	return problems
}

// orphanPage is how many orphaned reservations one check releases at most.
const orphanPage = 100
