package kubernetes

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		used, err := e.usedSlots(ctx)
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

// quotaHost is the one "host" of a slot quota's reservations: the quota is one pool of
// slots, wherever in the namespace the runtimes run.
func (e *kubeEnviron) quotaHost() string { return "namespace/" + e.spec.Namespace }

// reserveQuota reserves resource r's slots of the slot quota, under r.Lease, before its
// runtime is applied. The reservation is a row in the agents' database (domain.SlotStore),
// written only while the quota's one host holds no more than the quota less what other hosts
// hold (reservedElsewhere), so that agents sharing the database never hand out more than the
// quota between them; one that does not fit wraps domain.ErrNoCapacity, so the resource waits
// for room, and one larger than the whole quota is a *domain.NeverFitsError. The runtime keeps
// the reservation until it is deprovisioned or hibernated (releaseQuota); a resize within the
// quota resizes it. Without a quota, or for a type whose slots do not count (ClickHouse), it
// does nothing.
func (e *kubeEnviron) reserveQuota(ctx context.Context, r *environ.Resource, t resourceType, opts *environ.ResourceOptions, slots int) error {
	if e.spec.SlotQuota <= 0 || !t.slotQuota {
		return nil
	}
	if e.slots == nil {
		return fmt.Errorf("provisioner %q: slot_quota needs the agent's database to hold its reservations", e.name)
	}
	var elsewhere int // what the last pick saw reserved outside the quota's host
	pick := func(req domain.SlotRequest, existing *domain.Reservation, usage []domain.HostUsage) (string, error) {
		elsewhere = e.reservedElsewhere(existing, usage)
		return e.pickQuota(req, existing, usage)
	}
	room := func(host string) int {
		if host != e.quotaHost() {
			return 0
		}
		return e.spec.SlotQuota - elsewhere
	}
	req := domain.SlotRequest{Provisioner: e.name, ResourceID: r.ID, Owner: opts.Owner, Slots: slots, Lease: r.Lease, HostSlots: room}
	if _, err := e.slots.ReserveSlots(ctx, req, pick); err != nil {
		return fmt.Errorf("%s %s: reserve slots: %w", r.Type, r.ID, err)
	}
	return nil
}

// reservedElsewhere is what usage, as a pick of the slot quota was shown it, holds outside
// the quota's one host (reservations made under an earlier namespace), less the resource's
// own reservation there, which its new one moves. The quota counts every reservation of the
// provisioner, so the room a reservation's write is checked against on the quota's host
// (domain.SlotRequest.HostSlots) is the quota less that. Those hosts only lose slots (no pick
// places there), so what the pick saw of them is at least what they hold at the write.
func (e *kubeEnviron) reservedElsewhere(existing *domain.Reservation, usage []domain.HostUsage) int {
	elsewhere := 0
	for _, u := range usage {
		if u.Host != e.quotaHost() {
			elsewhere += u.UsedSlots
		}
	}
	if existing != nil && existing.Host != e.quotaHost() {
		elsewhere -= existing.Slots
	}
	return elsewhere
}

// pickQuota is the slot quota's domain.PickHost: req fits when the slots reserved by every
// other runtime leave room for it; more slots than the whole quota never fit. It runs inside
// the reservation's transaction.
func (e *kubeEnviron) pickQuota(req domain.SlotRequest, existing *domain.Reservation, usage []domain.HostUsage) (string, error) {
	if req.Slots > e.spec.SlotQuota {
		return "", environ.Permanent(&domain.NeverFitsError{Provisioner: e.name, Slots: req.Slots, Largest: e.spec.SlotQuota,
			Limit: fmt.Sprintf("its slot_quota is %d", e.spec.SlotQuota), Raise: "raise slot_quota in the provisioner set"})
	}
	used := 0
	for _, u := range usage {
		used += u.UsedSlots
	}
	if existing != nil {
		used -= existing.Slots
	}
	if req.Slots > e.spec.SlotQuota-used {
		return "", fmt.Errorf("slot quota of provisioner %q: %d of %d slots in use, %d more wanted: %w", e.name, used, e.spec.SlotQuota, req.Slots, domain.ErrNoCapacity)
	}
	return e.quotaHost(), nil
}

// releaseQuota gives back resource r's slots of the slot quota under r.Lease, when its type
// t counts slots; a runtime that holds none is fine.
func (e *kubeEnviron) releaseQuota(ctx context.Context, r *environ.Resource, t resourceType) error {
	if e.spec.SlotQuota <= 0 || !t.slotQuota || e.slots == nil {
		return nil
	}
	if err := e.slots.ReleaseSlots(ctx, e.name, r.ID, r.Lease); err != nil {
		return fmt.Errorf("%s %s: release slots: %w", r.Type, r.ID, err)
	}
	return nil
}

// usedSlots sums the slot quota's reservations.
func (e *kubeEnviron) usedSlots(ctx context.Context) (int, error) {
	if e.slots == nil {
		return 0, nil
	}
	res, err := e.slots.ListReservations(ctx, e.name)
	if err != nil {
		return 0, fmt.Errorf("list slot reservations: %w", err)
	}
	used := 0
	for _, r := range res {
		used += r.Slots
	}
	return used, nil
}
