package kubernetes

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// drift is one object that differs from what Berth would apply.
type drift struct {
	kind     string
	name     string
	reason   string
	deleting bool // the object is being deleted: wait for it to go rather than apply
}

// repair is the line for the resource's repair history once the object was re-applied.
func (d drift) repair() string {
	return fmt.Sprintf("%s %s re-applied: %s", strings.ToLower(d.kind), d.name, d.reason)
}

// drift compares d's objects with the live ones. An object is drifted when it is missing or
// being deleted, when its checksum annotation differs (the templates, the spec or the args
// changed), when fields Berth sets were edited out of band: a workload's replicas (zero for
// a hibernated resource), container images or resources, a Service's selector or ports, or
// when its labels under LabelPrefix are not the resource's. It also returns the newest
// fence (generation and lease) recorded on a live object, and keeps every live object it
// read in d.read for the apply that follows.
func (e *kubeEnviron) drift(ctx context.Context, cs kubernetes.Interface, d *desired) ([]drift, fence, error) {
	var out []drift
	var newest fence
	for _, obj := range d.objects {
		info, _ := kindOf(obj.GetAPIVersion(), obj.GetKind())
		read, err := e.live(ctx, cs, d, info, obj.GetName())
		if err != nil {
			return nil, fence{}, fmt.Errorf("get %s %s: %w", info.kind, obj.GetName(), err)
		}
		d.read[objectKey(info.kind, obj.GetName())] = read
		if read.missing {
			out = append(out, drift{kind: info.kind, name: obj.GetName(), reason: "missing (deleted out of band, or never created)"})
			continue
		}
		live := read.obj
		newest = newest.newer(fenceOf(live))
		var reason string
		switch {
		case live.GetDeletionTimestamp() != nil:
			out = append(out, drift{kind: info.kind, name: obj.GetName(), reason: "being deleted", deleting: true})
			continue
		case live.GetAnnotations()[AnnotationChecksum] != d.checksum:
			reason = "template checksum changed (templates, spec or args changed)"
		default:
			if reason, err = specDrift(obj, live); err != nil {
				return nil, fence{}, err
			}
			if _, relabel := relabelPatch(live.GetLabels(), d.userLabels); reason == "" && relabel {
				reason = "the resource's labels changed"
			}
		}
		if reason != "" {
			out = append(out, drift{kind: info.kind, name: obj.GetName(), reason: reason})
		}
	}
	return out, newest, nil
}

// live reads the live object of kind info and name, unless rendering d read it already.
func (e *kubeEnviron) live(ctx context.Context, cs kubernetes.Interface, d *desired, info kindInfo, name string) (liveObject, error) {
	if read, ok := d.read[objectKey(info.kind, name)]; ok {
		return read, nil
	}
	obj, err := info.client(cs, e.spec.Namespace).get(ctx, name)
	if apierrors.IsNotFound(err) {
		return liveObject{missing: true}, nil
	}
	if err != nil {
		return liveObject{}, err
	}
	return liveObject{obj: obj}, nil
}

// specDrift says which fields Berth sets on obj were changed on live, or "" when none were.
func specDrift(obj *unstructured.Unstructured, live metav1.Object) (string, error) {
	switch l := live.(type) {
	case *appsv1.Deployment:
		var want appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &want); err != nil {
			return "", fmt.Errorf("decode deployment %s: %w", obj.GetName(), err)
		}
		return workloadDrift(want.Spec.Replicas, l.Spec.Replicas, want.Spec.Template.Spec, l.Spec.Template.Spec), nil
	case *appsv1.StatefulSet:
		var want appsv1.StatefulSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &want); err != nil {
			return "", fmt.Errorf("decode statefulset %s: %w", obj.GetName(), err)
		}
		return workloadDrift(want.Spec.Replicas, l.Spec.Replicas, want.Spec.Template.Spec, l.Spec.Template.Spec), nil
	case *corev1.Service:
		var want corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &want); err != nil {
			return "", fmt.Errorf("decode service %s: %w", obj.GetName(), err)
		}
		return serviceDrift(want.Spec, l.Spec), nil
	}
	return "", nil
}

func workloadDrift(wantReplicas, haveReplicas *int32, want, have corev1.PodSpec) string {
	w, h := replicas(wantReplicas), replicas(haveReplicas)
	if w != h {
		return fmt.Sprintf("replicas changed out of band (%d, want %d)", h, w)
	}
	for _, wc := range want.Containers {
		hc, ok := container(have.Containers, wc.Name)
		if !ok {
			return fmt.Sprintf("container %s removed out of band", wc.Name)
		}
		if hc.Image != wc.Image {
			return fmt.Sprintf("container %s image changed out of band (%s, want %s)", wc.Name, hc.Image, wc.Image)
		}
		if !covers(hc.Resources.Requests, wc.Resources.Requests) || !covers(hc.Resources.Limits, wc.Resources.Limits) {
			return fmt.Sprintf("container %s resources changed out of band", wc.Name)
		}
	}
	return ""
}

// covers reports whether have holds every quantity of want.
func covers(have, want corev1.ResourceList) bool {
	for name, q := range want {
		h, ok := have[name]
		if !ok || h.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func serviceDrift(want, have corev1.ServiceSpec) string {
	for k, v := range want.Selector {
		if have.Selector[k] != v {
			return "selector changed out of band"
		}
	}
	for _, wp := range want.Ports {
		found := false
		for _, hp := range have.Ports {
			if hp.Name == wp.Name && hp.Port == wp.Port && (wp.TargetPort.String() == "0" || hp.TargetPort == wp.TargetPort) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Sprintf("port %s (%d) changed out of band", wp.Name, wp.Port)
		}
	}
	return ""
}

func replicas(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}

func container(cs []corev1.Container, name string) (corev1.Container, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c, true
		}
	}
	return corev1.Container{}, false
}
