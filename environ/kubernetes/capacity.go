package kubernetes

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

var _ environ.CapacityReporter = (*kubeEnviron)(nil)

// Capacity implements environ.CapacityReporter. With a slot quota it reports slots: the quota,
// and the slots of this provisioner's runtimes. Otherwise it reports millicpu: the allocatable
// CPU of the nodes runtimes can go to (not cordoned, every NoSchedule/NoExecute taint
// tolerated by the runtime pod template) and the CPU requests of this provisioner's pods.
func (e *kubeEnviron) Capacity(ctx context.Context) (environ.Capacity, error) {
	cs, err := e.client()
	if err != nil {
		return environ.Capacity{}, err
	}
	if e.spec.SlotQuota > 0 {
		used, err := e.usedSlots(ctx, cs, "")
		if err != nil {
			return environ.Capacity{}, err
		}
		return environ.Capacity{Unit: "slots", Total: int64(e.spec.SlotQuota), Used: int64(used)}, nil
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return environ.Capacity{}, fmt.Errorf("list nodes: %w", explainForbidden(err))
	}
	pods, err := cs.CoreV1().Pods(e.spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: e.provisionerSelector()})
	if err != nil {
		return environ.Capacity{}, fmt.Errorf("list pods: %w", explainForbidden(err))
	}
	usedByNode := make(map[string]int64)
	var used int64
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		var m int64
		for _, c := range p.Spec.Containers {
			m += c.Resources.Requests.Cpu().MilliValue()
		}
		used += m
		usedByNode[p.Spec.NodeName] += m
	}
	out := environ.Capacity{Unit: "millicpu", Used: used}
	for _, n := range nodes.Items {
		if !e.schedulable(&n) {
			continue
		}
		total := n.Status.Allocatable.Cpu().MilliValue()
		out.Total += total
		out.Hosts = append(out.Hosts, environ.HostCapacity{Host: n.Name, Total: total, Used: usedByNode[n.Name], Down: !nodeReady(&n)})
	}
	sort.Slice(out.Hosts, func(i, j int) bool { return out.Hosts[i].Host < out.Hosts[j].Host })
	return out, nil
}

// schedulable reports whether runtimes can go to node n.
func (e *kubeEnviron) schedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for j := range e.tolerations {
			if tolerates(&e.tolerations[j], t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// tolerates is the scheduler's toleration match for the Equal and Exists operators.
func tolerates(tol *corev1.Toleration, t *corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key == "" {
		return tol.Operator == corev1.TolerationOpExists
	}
	if tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return tol.Value == t.Value
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// usedSlots sums the slots of this provisioner's runtime Deployments, except resource skip's
// and those scaled to zero (hibernated).
func (e *kubeEnviron) usedSlots(ctx context.Context, cs kubernetes.Interface, skip string) (int, error) {
	l, err := cs.AppsV1().Deployments(e.spec.Namespace).List(ctx, metav1.ListOptions{LabelSelector: e.provisionerSelector()})
	if err != nil {
		return 0, fmt.Errorf("list deployments: %w", explainForbidden(err))
	}
	used := 0
	for _, d := range l.Items {
		if d.Labels[LabelResourceID] == skip || d.DeletionTimestamp != nil || replicas(d.Spec.Replicas) == 0 {
			continue // a hibernated runtime (no replicas) holds no slots
		}
		n, err := strconv.Atoi(d.Annotations[AnnotationSlots])
		if err != nil || n < 1 {
			continue // not a runtime of this provisioner's making
		}
		if used > math.MaxInt-n {
			return math.MaxInt, nil // annotations edited out of band: no room at all
		}
		used += n
	}
	return used, nil
}

// checkQuota refuses slots for resource id when the other runtimes already hold too many of
// the quota; the error wraps domain.ErrNoCapacity so the resource waits for room.
func (e *kubeEnviron) checkQuota(ctx context.Context, cs kubernetes.Interface, id string, slots int) error {
	used, err := e.usedSlots(ctx, cs, id)
	if err != nil {
		return err
	}
	if slots > e.spec.SlotQuota-used {
		return fmt.Errorf("slot quota of provisioner %q: %d of %d slots in use, %d more wanted: %w", e.name, used, e.spec.SlotQuota, slots, domain.ErrNoCapacity)
	}
	return nil
}
