package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// rewatchDelay is the pause before a watch that ended is listed and started again.
const rewatchDelay = time.Second

// errTimeout is the cause of an AwaitReady context that ran out of timeout_seconds.
var errTimeout = errors.New("timed out")

// AwaitReady implements environ.Environ: it watches the resource's workload (a runtime's
// Deployment, a ClickHouse StatefulSet) until its rollout is complete, for at most
// timeout_seconds. When it is not, the error says why, from the workload's conditions and its
// pods' scheduling and container states.
func (e *kubeEnviron) AwaitReady(ctx context.Context, r *environ.Resource) error {
	if !e.Supports(r.Type) {
		return environ.Permanent(fmt.Errorf("provisioner %q cannot provision %s resources", e.name, r.Type))
	}
	cs, err := e.client()
	if err != nil {
		return err
	}
	timeout := time.Duration(e.spec.TimeoutSeconds) * time.Second
	waitCtx, cancel := context.WithCancelCause(ctx)
	timer := e.clock.AfterFunc(timeout, func() { cancel(errTimeout) })
	defer func() {
		timer.Stop()
		cancel(context.Canceled)
	}()
	w := e.workloadOf(cs, r.Type)
	spanCtx, end := startSpan(waitCtx, SpanRolloutWait, r, attribute.String("k8s.namespace.name", e.spec.Namespace), attribute.String("berth.kubernetes.kind", w.kind))
	why, err := w.await(spanCtx, e.selector(r.ID), e.closed, e.clock)
	switch {
	case err == nil:
	case context.Cause(waitCtx) == errTimeout && ctx.Err() == nil:
		err = fmt.Errorf("%s %s not ready within %s: %s", r.Type, r.ID, timeout, e.diagnose(ctx, cs, r, why))
	default:
		err = fmt.Errorf("await %s %s: %w", r.Type, r.ID, err)
	}
	end(err)
	return err
}

// workload is how Berth watches the kind of object that runs a resource.
type workload struct {
	kind  string
	list  func(ctx context.Context, selector string) ([]runtime.Object, string, error)
	watch func(ctx context.Context, selector, resourceVersion string) (watch.Interface, error)
	ready func(obj runtime.Object) (bool, string)
}

func (e *kubeEnviron) workloadOf(cs kubernetes.Interface, t domain.ResourceType) workload {
	ns := e.spec.Namespace
	if t == domain.ResourceTypeClickHouse {
		c := cs.AppsV1().StatefulSets(ns)
		return workload{
			kind: "statefulset",
			list: func(ctx context.Context, sel string) ([]runtime.Object, string, error) {
				l, err := c.List(ctx, metav1.ListOptions{LabelSelector: sel})
				if err != nil {
					return nil, "", explainForbidden(err)
				}
				objs := make([]runtime.Object, len(l.Items))
				for i := range l.Items {
					objs[i] = &l.Items[i]
				}
				return objs, l.ResourceVersion, nil
			},
			watch: func(ctx context.Context, sel, rv string) (watch.Interface, error) {
				w, err := c.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv})
				return w, explainForbidden(err)
			},
			ready: func(obj runtime.Object) (bool, string) {
				s, ok := obj.(*appsv1.StatefulSet)
				if !ok {
					return false, ""
				}
				return statefulSetReady(s)
			},
		}
	}
	c := cs.AppsV1().Deployments(ns)
	return workload{
		kind: "deployment",
		list: func(ctx context.Context, sel string) ([]runtime.Object, string, error) {
			l, err := c.List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return nil, "", explainForbidden(err)
			}
			objs := make([]runtime.Object, len(l.Items))
			for i := range l.Items {
				objs[i] = &l.Items[i]
			}
			return objs, l.ResourceVersion, nil
		},
		watch: func(ctx context.Context, sel, rv string) (watch.Interface, error) {
			w, err := c.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv})
			return w, explainForbidden(err)
		},
		ready: func(obj runtime.Object) (bool, string) {
			d, ok := obj.(*appsv1.Deployment)
			if !ok {
				return false, ""
			}
			return deploymentReady(d)
		},
	}
}

// status lists the workload once and says whether it is ready, and if not, why.
func (w workload) status(ctx context.Context, selector string) (bool, string, error) {
	objs, _, err := w.list(ctx, selector)
	if err != nil {
		return false, "", fmt.Errorf("list %ss: %w", w.kind, err)
	}
	if len(objs) == 0 {
		return false, fmt.Sprintf("no %s found", w.kind), nil
	}
	ready, why := w.ready(objs[0])
	return ready, why, nil
}

// await lists the workload and watches it from there until it is ready or ctx ends; a watch
// that ends early (the server closes watches from time to time) is started again after a
// short pause. It returns the last reason the workload was not ready.
func (w workload) await(ctx context.Context, selector string, closed <-chan struct{}, clk interface {
	After(time.Duration) <-chan time.Time
}) (string, error) {
	why := fmt.Sprintf("no %s found", w.kind)
	for round := 0; ; round++ {
		if round > 0 {
			select {
			case <-ctx.Done():
				return why, ctx.Err()
			case <-closed:
				return why, errors.New("provisioner closed")
			case <-clk.After(rewatchDelay):
			}
		}
		objs, rv, err := w.list(ctx, selector)
		if err != nil {
			if ctx.Err() != nil {
				return why, ctx.Err()
			}
			why = fmt.Sprintf("list %ss: %v", w.kind, err)
			continue
		}
		if len(objs) > 0 {
			ready, reason := w.ready(objs[0])
			if ready {
				return "", nil
			}
			why = reason
		}
		watcher, err := w.watch(ctx, selector, rv)
		if err != nil {
			if ctx.Err() != nil {
				return why, ctx.Err()
			}
			why = fmt.Sprintf("watch %ss: %v", w.kind, err)
			continue
		}
		done, reason, err := w.follow(ctx, watcher, closed)
		watcher.Stop()
		if reason != "" {
			why = reason
		}
		if done || err != nil {
			return why, err
		}
	}
}

// follow reads watch events until the workload is ready (done), the watch ends (to be
// started again) or ctx ends (err).
func (w workload) follow(ctx context.Context, watcher watch.Interface, closed <-chan struct{}) (bool, string, error) {
	why := ""
	for {
		select {
		case <-ctx.Done():
			return false, why, ctx.Err()
		case <-closed:
			return false, why, errors.New("provisioner closed")
		case ev, ok := <-watcher.ResultChan():
			if !ok || ev.Type == watch.Error {
				return false, why, nil
			}
			if ev.Type == watch.Deleted {
				why = fmt.Sprintf("%s was deleted", w.kind)
				continue
			}
			ready, reason := w.ready(ev.Object)
			if ready {
				return true, "", nil
			}
			if reason != "" {
				why = reason
			}
		}
	}
}

// deploymentReady is kubectl's rollout-complete test.
func deploymentReady(d *appsv1.Deployment) (bool, string) {
	want := replicas(d.Spec.Replicas)
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return false, fmt.Sprintf("deployment %s: the controller has not yet seen generation %d", d.Name, d.Generation)
	case st.UpdatedReplicas != want:
		return false, fmt.Sprintf("deployment %s: %d of %d replicas updated", d.Name, st.UpdatedReplicas, want)
	case st.Replicas != want:
		return false, fmt.Sprintf("deployment %s: %d old replicas still terminating", d.Name, st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas != want:
		return false, fmt.Sprintf("deployment %s: %d of %d replicas available", d.Name, st.AvailableReplicas, want)
	}
	return true, ""
}

func statefulSetReady(s *appsv1.StatefulSet) (bool, string) {
	want := replicas(s.Spec.Replicas)
	switch {
	case s.Status.ObservedGeneration < s.Generation:
		return false, fmt.Sprintf("statefulset %s: the controller has not yet seen generation %d", s.Name, s.Generation)
	case s.Status.ReadyReplicas != want:
		return false, fmt.Sprintf("statefulset %s: %d of %d replicas ready", s.Name, s.Status.ReadyReplicas, want)
	}
	return true, ""
}

// diagnose explains why r's workload is not ready: why (the workload's own status), its
// failing conditions and what holds up its pods. It uses ctx (not the expired wait).
func (e *kubeEnviron) diagnose(ctx context.Context, cs kubernetes.Interface, r *environ.Resource, why string) string {
	reasons := []string{why}
	sel := e.selector(r.ID)
	ns := e.spec.Namespace
	if r.Type == domain.ResourceTypeRuntime {
		if l, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil {
			for _, d := range l.Items {
				for _, c := range d.Status.Conditions {
					failing := (c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue) ||
						(c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse)
					if failing {
						reasons = append(reasons, fmt.Sprintf("deployment %s %s: %s: %s", d.Name, c.Type, c.Reason, c.Message))
					}
				}
			}
		}
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		reasons = append(reasons, fmt.Sprintf("cannot list pods: %v", explainForbidden(err)))
		return strings.Join(nonEmpty(reasons), "; ")
	}
	items := pods.Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	for _, p := range items {
		if p.DeletionTimestamp != nil {
			continue
		}
		reasons = append(reasons, podProblems(&p)...)
	}
	if len(items) == 0 {
		reasons = append(reasons, "no pods")
	}
	return strings.Join(nonEmpty(reasons), "; ")
}

// podProblems says what keeps pod from running: not scheduled, containers waiting or failed.
func podProblems(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			out = append(out, fmt.Sprintf("pod %s not scheduled: %s: %s", p.Name, c.Reason, c.Message))
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range statuses {
		switch {
		case s.State.Waiting != nil && s.State.Waiting.Reason != "":
			msg := fmt.Sprintf("pod %s container %s waiting: %s", p.Name, s.Name, s.State.Waiting.Reason)
			if s.State.Waiting.Message != "" {
				msg += ": " + s.State.Waiting.Message
			}
			out = append(out, msg)
		case s.State.Terminated != nil && s.State.Terminated.ExitCode != 0:
			out = append(out, fmt.Sprintf("pod %s container %s terminated: %s (exit code %d)", p.Name, s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode))
		}
	}
	return out
}

func nonEmpty(list []string) []string {
	out := list[:0]
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
