package kubernetes

import (
	"context"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// kindInfo is a kind of object Berth creates.
type kindInfo struct {
	apiVersion string
	kind       string
	plural     string // for messages and errors, e.g. "deployments"
	rank       int    // apply order: volumes and services before workloads, ingresses last
	newObject  func() runtime.Object
	client     func(cs kubernetes.Interface, ns string) objectClient
}

// kinds lists every kind Berth creates, and so every kind Deprovision and the orphan sweep
// look for.
var kinds = []kindInfo{
	{"v1", "Secret", "secrets", 0, func() runtime.Object { return &corev1.Secret{} },
		func(cs kubernetes.Interface, ns string) objectClient { return typed(cs.CoreV1().Secrets(ns)) }},
	{"v1", "ConfigMap", "configmaps", 0, func() runtime.Object { return &corev1.ConfigMap{} },
		func(cs kubernetes.Interface, ns string) objectClient { return typed(cs.CoreV1().ConfigMaps(ns)) }},
	{"v1", "PersistentVolumeClaim", "persistentvolumeclaims", 1, func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		func(cs kubernetes.Interface, ns string) objectClient {
			return typed(cs.CoreV1().PersistentVolumeClaims(ns))
		}},
	{"v1", "Service", "services", 2, func() runtime.Object { return &corev1.Service{} },
		func(cs kubernetes.Interface, ns string) objectClient { return typed(cs.CoreV1().Services(ns)) }},
	{"apps/v1", "Deployment", "deployments", 3, func() runtime.Object { return &appsv1.Deployment{} },
		func(cs kubernetes.Interface, ns string) objectClient { return typed(cs.AppsV1().Deployments(ns)) }},
	{"apps/v1", "StatefulSet", "statefulsets", 3, func() runtime.Object { return &appsv1.StatefulSet{} },
		func(cs kubernetes.Interface, ns string) objectClient { return typed(cs.AppsV1().StatefulSets(ns)) }},
	{"networking.k8s.io/v1", "Ingress", "ingresses", 4, func() runtime.Object { return &networkingv1.Ingress{} },
		func(cs kubernetes.Interface, ns string) objectClient { return typed(cs.NetworkingV1().Ingresses(ns)) }},
}

func kindOf(apiVersion, kind string) (kindInfo, bool) {
	for _, k := range kinds {
		if k.apiVersion == apiVersion && k.kind == kind {
			return k, true
		}
	}
	return kindInfo{}, false
}

func kindNames() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.apiVersion + " " + k.kind
	}
	sort.Strings(names)
	return names
}

// objectClient is what Berth does with objects of one kind in one namespace.
type objectClient struct {
	get  func(ctx context.Context, name string) (metav1.Object, error)
	list func(ctx context.Context, selector string) ([]metav1.Object, error)
	// apply server-side applies body and returns the object as written.
	apply func(ctx context.Context, name string, body []byte) (metav1.Object, error)
	// del deletes the object, on condition that it is at resourceVersion when one is given.
	del func(ctx context.Context, name, resourceVersion string) error
	// patch applies a JSON merge patch to the object.
	patch func(ctx context.Context, name string, body []byte) error
}

// typedClient is the part of a generated typed client Berth uses.
type typedClient[T metav1.Object, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// fieldManager owns the fields Berth applies.
const fieldManager = "berth"

func typed[T metav1.Object, L runtime.Object](c typedClient[T, L]) objectClient {
	force := true
	foreground := metav1.DeletePropagationForeground
	return objectClient{
		get: func(ctx context.Context, name string) (metav1.Object, error) {
			o, err := c.Get(ctx, name, metav1.GetOptions{})
			return o, explainForbidden(err)
		},
		list: func(ctx context.Context, selector string) ([]metav1.Object, error) {
			l, err := c.List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return nil, explainForbidden(err)
			}
			items, err := meta.ExtractList(l)
			if err != nil {
				return nil, err
			}
			out := make([]metav1.Object, 0, len(items))
			for _, item := range items {
				o, err := meta.Accessor(item)
				if err != nil {
					return nil, err
				}
				out = append(out, o)
			}
			return out, nil
		},
		apply: func(ctx context.Context, name string, body []byte) (metav1.Object, error) {
			o, err := c.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
			if err != nil {
				return nil, explainForbidden(err)
			}
			return o, nil
		},
		del: func(ctx context.Context, name, resourceVersion string) error {
			opts := metav1.DeleteOptions{PropagationPolicy: &foreground}
			if resourceVersion != "" {
				opts.Preconditions = &metav1.Preconditions{ResourceVersion: &resourceVersion}
			}
			return explainForbidden(c.Delete(ctx, name, opts))
		},
		patch: func(ctx context.Context, name string, body []byte) error {
			_, err := c.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
			return explainForbidden(err)
		},
	}
}
