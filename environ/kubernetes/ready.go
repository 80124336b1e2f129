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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/environ"
)

// rewatchDelay is the pause before a watch that ended is listed and started again.
const rewatchDelay = time.Second

// errTimeout is the cause of an AwaitReady context that ran out of timeout_seconds.
var errTimeout = errors.New("timed out")

// AwaitReady implements environ.Environ: it watches the resource's workload (a runtime's
// Deployment, a ClickHouse StatefulSet) until its rollout is complete, for at most
// timeout_seconds: on the provisioner's shared cache of its workloads (cachedRollouts) when
// this environ's last Reconcile of the resource said which generation to wait for and the
// cache has listed them, else by listing and watching the workload alone (after a restart,
// or while the cache makes its first list). When it is not, the error says why, from the
// workload's conditions and its pods' scheduling and container states.
func (e *kubeEnviron) AwaitReady(ctx context.Context, r *environ.Resource) (err error) {
	defer func() { err = markUnavailable(err) }()
	t, err := e.typeOf(r)
	if err != nil {
		return err
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
	w := e.workloadOf(cs, t)
	spanCtx, end := startSpan(waitCtx, SpanRolloutWait, r, attribute.String("k8s.namespace.name", e.spec.Namespace), attribute.String("berth.kubernetes.kind", w.kind))
	why, err := e.awaitRollout(spanCtx, cs, r.ID, t.workload, w)
	switch {
	case err == nil:
	case context.Cause(waitCtx) == errTimeout && ctx.Err() == nil:
		err = fmt.Errorf("%s %s not ready within %s: %s", r.Type, r.ID, timeout, e.diagnose(ctx, cs, r, w, why))
	default:
		err = fmt.Errorf("await %s %s: %w", r.Type, r.ID, err)
	}
	end(err)
	return err
}

// workloadKind is a kind of object that can run a resource: one whose status reports a
// rollout (rolloutOf).
type workloadKind struct {
	kind   string // as objects name it: "Deployment"
	client func(cs kubernetes.Interface, ns string) workload
	// informed lists and watches the objects of the kind in namespace ns that selector
	// selects, for an informer of objects like example.
	informed func(cs kubernetes.Interface, ns, selector string) (lw cache.ListerWatcher, example runtime.Object)
}

// The workload kinds, for the resource types' entries.
var (
	deployments = newWorkloadKind("Deployment", &appsv1.Deployment{}, func(cs kubernetes.Interface, ns string) listWatcher[*appsv1.DeploymentList] {
		return cs.AppsV1().Deployments(ns)
	})
	statefulSets = newWorkloadKind("StatefulSet", &appsv1.StatefulSet{}, func(cs kubernetes.Interface, ns string) listWatcher[*appsv1.StatefulSetList] {
		return cs.AppsV1().StatefulSets(ns)
	})
)

// newWorkloadKind is the workload kind of objects like example, which c lists and watches
// in a namespace.
func newWorkloadKind[L runtime.Object](kind string, example runtime.Object, c func(cs kubernetes.Interface, ns string) listWatcher[L]) workloadKind {
	return workloadKind{
		kind: kind,
		client: func(cs kubernetes.Interface, ns string) workload {
			return watchable(strings.ToLower(kind), c(cs, ns))
		},
		informed: func(cs kubernetes.Interface, ns, selector string) (cache.ListerWatcher, runtime.Object) {
			return listWatchOf(cs, c(cs, ns), selector), example.DeepCopyObject()
		},
	}
}

// workload is how Berth lists and watches the objects of one workload kind in a namespace.
type workload struct {
	kind  string // lower case, for messages: "deployment"
	list  func(ctx context.Context, selector string) ([]runtime.Object, string, error)
	watch func(ctx context.Context, selector, resourceVersion string) (watch.Interface, error)
}

// workloadOf is the workload of resource type t in the spec's namespace.
func (e *kubeEnviron) workloadOf(cs kubernetes.Interface, t resourceType) workload {
	return t.workload.client(cs, e.spec.Namespace)
}

// listWatcher is the part of a generated typed client a workload uses.
type listWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

func watchable[L runtime.Object](kind string, c listWatcher[L]) workload {
	return workload{
		kind: kind,
		list: func(ctx context.Context, sel string) ([]runtime.Object, string, error) {
			l, err := c.List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return nil, "", explainForbidden(err)
			}
			objs, err := meta.ExtractList(l)
			if err != nil {
				return nil, "", err
			}
			lm, err := meta.ListAccessor(l)
			if err != nil {
				return nil, "", err
			}
			return objs, lm.GetResourceVersion(), nil
		},
		watch: func(ctx context.Context, sel, rv string) (watch.Interface, error) {
			w, err := c.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv})
			return w, explainForbidden(err)
		},
	}
}

// rolledOut says whether obj, a workload, has completed its rollout, and if not, why; an
// object that runs no rollout never has.
func rolledOut(obj runtime.Object) (bool, string) {
	ro, ok := rolloutOf(obj)
	if !ok {
		return false, ""
	}
	return ro.complete()
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
	ready, why := rolledOut(objs[0])
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
			ready, reason := rolledOut(objs[0])
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
			ready, reason := rolledOut(ev.Object)
			if ready {
				return true, "", nil
			}
			if reason != "" {
				why = reason
			}
		}
	}
}

// rollout is the status of a rollout as Deployments and StatefulSets both report it.
type rollout struct {
	kind       string // lower case, for messages
	name       string
	generation int64
	// observed is the generation the controller last acted on.
	observed int64
	// want is the replicas the spec asks for; the others count the workload's pods: all of
	// them, those of the current template, and the available ones. Available pods are
	// ready ones (for the spec's minReadySeconds), so the ready count adds nothing here.
	want, replicas, updated, available int32
	conditions                         []condition
}

// condition is a condition of a workload's status.
type condition struct {
	kind, status, reason, message string
}

// failing reports whether c says the rollout is stuck: pods cannot be created, or it
// stopped progressing.
func (c condition) failing() bool {
	return (c.kind == string(appsv1.DeploymentReplicaFailure) && c.status == string(corev1.ConditionTrue)) ||
		(c.kind == string(appsv1.DeploymentProgressing) && c.status == string(corev1.ConditionFalse))
}

// rolloutOf reads the rollout of a Deployment or a StatefulSet; other objects have none.
func rolloutOf(obj runtime.Object) (rollout, bool) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		st := w.Status
		ro := rollout{kind: "deployment", name: w.Name, generation: w.Generation, observed: st.ObservedGeneration, want: replicas(w.Spec.Replicas),
			replicas: st.Replicas, updated: st.UpdatedReplicas, available: st.AvailableReplicas}
		for _, c := range st.Conditions {
			ro.conditions = append(ro.conditions, condition{string(c.Type), string(c.Status), c.Reason, c.Message})
		}
		return ro, true
	case *appsv1.StatefulSet:
		st := w.Status
		ro := rollout{kind: "statefulset", name: w.Name, generation: w.Generation, observed: st.ObservedGeneration, want: replicas(w.Spec.Replicas),
			replicas: st.Replicas, updated: st.UpdatedReplicas, available: st.AvailableReplicas}
		for _, c := range st.Conditions {
			ro.conditions = append(ro.conditions, condition{string(c.Type), string(c.Status), c.Reason, c.Message})
		}
		return ro, true
	}
	return rollout{}, false
}

// complete is kubectl's rollout-complete test of a Deployment, for either kind: the
// controller has seen the spec, every pod runs the current template, no old pod is left
// and every pod is available. A workload scaled to zero is complete once its last pod is
// gone.
func (ro rollout) complete() (bool, string) {
	switch {
	case ro.observed < ro.generation:
		return false, fmt.Sprintf("%s %s: the controller has not yet seen generation %d", ro.kind, ro.name, ro.generation)
	case ro.updated != ro.want:
		return false, fmt.Sprintf("%s %s: %d of %d replicas updated", ro.kind, ro.name, ro.updated, ro.want)
	case ro.replicas != ro.want:
		return false, fmt.Sprintf("%s %s: %d old replicas still terminating", ro.kind, ro.name, ro.replicas-ro.updated)
	case ro.available != ro.want:
		return false, fmt.Sprintf("%s %s: %d of %d replicas available", ro.kind, ro.name, ro.available, ro.want)
	}
	return true, ""
}

// diagnose explains why r's workload w is not ready: why (the workload's own status), its
// failing conditions and what holds up its pods. It uses ctx (not the expired wait).
func (e *kubeEnviron) diagnose(ctx context.Context, cs kubernetes.Interface, r *environ.Resource, w workload, why string) string {
	reasons := []string{why}
	sel := e.selector(r.ID)
	ns := e.spec.Namespace
	if objs, _, err := w.list(ctx, sel); err == nil {
		for _, obj := range objs {
			ro, _ := rolloutOf(obj)
			for _, c := range ro.conditions {
				if c.failing() {
					reasons = append(reasons, fmt.Sprintf("%s %s %s: %s: %s", ro.kind, ro.name, c.kind, c.reason, c.message))
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
