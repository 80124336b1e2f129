package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/environ"
)

// resourceIDIndex indexes the rollouts cache by the resource id label.
const resourceIDIndex = "resource-id"

// rollouts keeps the provisioner's workloads of one kind (every Deployment, or every
// StatefulSet, carrying its labels) in a cache fed by one list and one watch: an informer.
// AwaitReady waits on it, where each wait listed its resource's workload and watched it on
// its own: two requests per rollout, the list one the API server answers by going through
// every workload of the namespace, so that a burst of n rollouts cost it n times the
// namespace. The cache holds only what a rollout's status needs (trimWorkload).
type rollouts struct {
	kind     string // lower case, for messages: "deployment"
	informer cache.SharedIndexInformer

	mu sync.Mutex
	// waiters are the waits in progress, by resource id: each is told of every event of
	// its resource's workload.
	waiters map[string]map[*rolloutWaiter]struct{}
}

// rolloutWaiter is one wait for a resource's rollout: changed gets a value when the
// resource's workload changes.
type rolloutWaiter struct {
	changed chan struct{}
}

// newRollouts returns the rollouts of the workloads lw lists and watches, of objects like
// example; kind names them in messages. Only objects selector matches count. It does not
// run until run is called.
func newRollouts(kind string, lw cache.ListerWatcher, example runtime.Object, selector labels.Selector) (*rollouts, error) {
	ro := &rollouts{kind: kind, waiters: make(map[string]map[*rolloutWaiter]struct{})}
	ro.informer = cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{
		resourceIDIndex: func(obj any) ([]string, error) {
			if id, ok := resourceIDOf(obj, selector); ok {
				return []string{id}, nil
			}
			return nil, nil
		},
	})
	if err := ro.informer.SetTransform(trimWorkload); err != nil {
		return nil, err
	}
	notify := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if id, ok := resourceIDOf(obj, selector); ok {
			ro.notify(id)
		}
	}
	if _, err := ro.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}); err != nil {
		return nil, err
	}
	return ro, nil
}

// resourceIDOf is the resource id of obj, a workload, when selector matches it.
func resourceIDOf(obj any, selector labels.Selector) (string, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	l := m.GetLabels()
	id := l[LabelResourceID]
	if id == "" || !selector.Matches(labels.Set(l)) {
		return "", false
	}
	return id, true
}

// trimWorkload keeps of a Deployment or a StatefulSet what its rollout's status needs
// (rolloutOf), so that the cache does not hold every pod template of the provisioner.
func trimWorkload(obj any) (any, error) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: trimMeta(w.ObjectMeta), Spec: appsv1.DeploymentSpec{Replicas: w.Spec.Replicas}, Status: w.Status}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: trimMeta(w.ObjectMeta), Spec: appsv1.StatefulSetSpec{Replicas: w.Spec.Replicas}, Status: w.Status}, nil
	}
	return obj, nil
}

// trimMeta keeps of m what the cache keys and indexes objects by and rolloutOf reads.
func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Labels: m.Labels, DeletionTimestamp: m.DeletionTimestamp}
}

// run runs the informer until stop is closed.
func (ro *rollouts) run(stop <-chan struct{}) {
	ro.informer.Run(stop)
}

// notify tells the waits for resource id that its workload changed.
func (ro *rollouts) notify(id string) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	for w := range ro.waiters[id] {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
}

// register starts a wait for resource id.
func (ro *rollouts) register(id string) *rolloutWaiter {
	w := &rolloutWaiter{changed: make(chan struct{}, 1)}
	ro.mu.Lock()
	defer ro.mu.Unlock()
	if ro.waiters[id] == nil {
		ro.waiters[id] = make(map[*rolloutWaiter]struct{})
	}
	ro.waiters[id][w] = struct{}{}
	return w
}

// unregister ends wait w for resource id.
func (ro *rollouts) unregister(id string, w *rolloutWaiter) {
	ro.mu.Lock()
	defer ro.mu.Unlock()
	delete(ro.waiters[id], w)
	if len(ro.waiters[id]) == 0 {
		delete(ro.waiters, id)
	}
}

// synced says whether the cache has listed the workloads once: until it has, it cannot
// tell a workload not created yet from one not listed yet.
func (ro *rollouts) synced() bool {
	return ro.informer.HasSynced()
}

// await waits until the workload of resource id, at generation floor or later (the one its
// last apply wrote, or read: the cache may still hold an older one, rolled out before the
// apply), has completed its rollout, or ctx ends. It returns the last reason the workload
// was not ready. The cache must be synced.
func (ro *rollouts) await(ctx context.Context, id string, floor int64, closed <-chan struct{}) (string, error) {
	w := ro.register(id)
	defer ro.unregister(id, w)
	for {
		why, ready := ro.look(id, floor)
		if ready {
			return "", nil
		}
		select {
		case <-ctx.Done():
			return why, ctx.Err()
		case <-closed:
			return why, errors.New("provisioner closed")
		case <-w.changed:
		}
	}
}

// look says whether the cached workload of resource id, at generation floor or later, has
// completed its rollout, and if not, why.
func (ro *rollouts) look(id string, floor int64) (string, bool) {
	objs, err := ro.informer.GetIndexer().ByIndex(resourceIDIndex, id)
	if err != nil {
		return fmt.Sprintf("look up the %s: %v", ro.kind, err), false
	}
	for _, obj := range objs {
		o, ok := obj.(runtime.Object)
		if !ok {
			continue
		}
		m, err := meta.Accessor(o)
		if err != nil {
			continue
		}
		if m.GetGeneration() < floor {
			return fmt.Sprintf("%s %s: generation %d was applied; the cluster has shown %d so far", ro.kind, m.GetName(), floor, m.GetGeneration()), false
		}
		ready, why := rolledOut(o)
		return why, ready
	}
	return fmt.Sprintf("no %s found", ro.kind), false
}

// listWatchOf lists and watches the objects of c that selector selects, with the list
// semantics cs supports.
func listWatchOf[L runtime.Object](cs kubernetes.Interface, c listWatcher[L], selector string) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			l, err := c.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return c.Watch(ctx, opts)
		},
	}, cs)
}

// errClosed is why a closed environ starts no cache of workloads.
var errClosed = errors.New("provisioner closed")

// rolloutsOf returns the cache of the provisioner's workloads of kind k, started on first
// use and run until the environ is closed.
func (e *kubeEnviron) rolloutsOf(cs kubernetes.Interface, k workloadKind) (*rollouts, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ro, ok := e.rollouts[k.kind]; ok {
		return ro, nil
	}
	select {
	case <-e.closed:
		return nil, errClosed
	default:
	}
	selector, err := labels.Parse(e.provisionerSelector())
	if err != nil {
		return nil, fmt.Errorf("provisioner %q: select its workloads: %w", e.name, err)
	}
	lw, example := k.informed(cs, e.spec.Namespace, e.provisionerSelector())
	ro, err := newRollouts(strings.ToLower(k.kind), lw, example, selector)
	if err != nil {
		return nil, fmt.Errorf("provisioner %q: watch its %ss: %w", e.name, strings.ToLower(k.kind), err)
	}
	e.rollouts[k.kind] = ro
	e.running.Add(1)
	go func() {
		defer e.running.Done()
		ro.run(e.closed)
	}()
	return ro, nil
}

// recordFloor records the generation of r's workload as d holds it, applied or read, for
// the wait for its rollout that follows (AwaitReady, or Hibernate's for its scale-down).
func (e *kubeEnviron) recordFloor(r *environ.Resource, d *desired) {
	for _, obj := range d.objects {
		if obj.GetKind() != d.t.workload.kind {
			continue
		}
		live, ok := d.read[objectKey(obj.GetKind(), obj.GetName())]
		if !ok || live.obj == nil {
			return
		}
		e.floorsMu.Lock()
		e.floors[r.ID] = live.obj.GetGeneration()
		e.floorsMu.Unlock()
		return
	}
}

// awaitRollout waits until the rollout of resource id's workload w, of kind k, is complete
// (cachedRollouts, or w alone), and returns the last reason it was not.
func (e *kubeEnviron) awaitRollout(ctx context.Context, cs kubernetes.Interface, id string, k workloadKind, w workload) (string, error) {
	if ro, floor, ok := e.cachedRollouts(cs, id, k); ok {
		return ro.await(ctx, id, floor, e.closed)
	}
	return w.await(ctx, e.selector(id), e.closed, e.clock)
}

// cachedRollouts returns the cache of the provisioner's workloads of kind k to await
// resource id's rollout on, and the generation of its workload to wait for, recorded by its
// last Reconcile, which it forgets. It returns false when there is none, or the cache has
// not listed the workloads yet (it starts the cache): the caller lists and watches the
// workload itself.
func (e *kubeEnviron) cachedRollouts(cs kubernetes.Interface, id string, k workloadKind) (*rollouts, int64, bool) {
	floor, ok := e.takeFloor(id)
	if !ok {
		return nil, 0, false
	}
	ro, err := e.rolloutsOf(cs, k)
	if err != nil {
		if !errors.Is(err, errClosed) {
			e.logger.Warn("cannot watch the provisioner's workloads; each rollout is watched alone", "provisioner", e.name, "error", err)
		}
		return nil, 0, false
	}
	return ro, floor, ro.synced()
}

// takeFloor returns, and forgets, the workload generation recorded for resource id by its
// last Reconcile, and false when there is none.
func (e *kubeEnviron) takeFloor(id string) (int64, bool) {
	e.floorsMu.Lock()
	defer e.floorsMu.Unlock()
	floor, ok := e.floors[id]
	delete(e.floors, id)
	return floor, ok
}
