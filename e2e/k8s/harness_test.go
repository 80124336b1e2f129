//go:build k8s

package k8s_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	berthk8s "github.com/berth-dev/berth/environ/kubernetes"
	"github.com/berth-dev/berth/internal/e2etest"
)

// provisioner is the name of the kubernetes provisioner in the tests' sets.
const provisioner = "k8s"

// kubeconfigPath is the cluster's admin kubeconfig; a run without one fails.
func kubeconfigPath(t testing.TB) string {
	t.Helper()
	p := os.Getenv("BERTH_KUBECONFIG")
	if p == "" {
		t.Fatal("BERTH_KUBECONFIG is not set: start a cluster (scripts/k8s/up.sh prints its kubeconfig path) and set BERTH_KUBECONFIG to it")
	}
	return p
}

// clientset is an admin client of the test cluster.
func clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath(t))
	if err != nil {
		t.Fatalf("load BERTH_KUBECONFIG: %v", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespace creates a namespace of its own for the test and deletes it afterwards.
func namespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	name := "berth-e2e-" + hex.EncodeToString(suffix)
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, cs, name)
		}
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// dumpNamespace writes what a failed test left in ns to the test log: the nodes, workloads,
// pods, claims and events.
func dumpNamespace(t testing.TB, cs kubernetes.Interface, ns string) {
	ctx := context.Background()
	dumpNodes(t, cs)
	t.Logf("state of namespace %s follows", ns)
	if l, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, d := range l.Items {
			t.Logf("deployment %s: generation %d, image %s, status %+v", d.Name, d.Generation, image(&d), d.Status)
		}
	}
	if l, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range l.Items {
			t.Logf("statefulset %s: generation %d, status %+v", s.Name, s.Generation, s.Status)
		}
	}
	if l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range l.Items {
			t.Logf("pod %s: node %q, phase %s, conditions %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
		}
	}
	if l, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range l.Items {
			t.Logf("claim %s: phase %s, requests %v", c.Name, c.Status.Phase, c.Spec.Resources.Requests)
		}
	}
	if l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ev := range l.Items {
			t.Logf("event %s/%s: %s: %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
}

// dumpNodes writes each node's readiness, heartbeat, taints and pods (of every namespace) to the
// test log: a pod that is never scheduled or never ready is often the cluster's doing (a full or
// tainted node, fake nodes no longer heartbeating), not the test's.
func dumpNodes(t testing.TB, cs kubernetes.Interface) {
	ctx := context.Background()
	pods := map[string]map[corev1.PodPhase]int{}
	if l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range l.Items {
			if pods[p.Spec.NodeName] == nil {
				pods[p.Spec.NodeName] = map[corev1.PodPhase]int{}
			}
			pods[p.Spec.NodeName][p.Status.Phase]++
		}
	}
	l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("list nodes: %v", err)
		return
	}
	for _, n := range l.Items {
		ready := "no Ready condition"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = fmt.Sprintf("Ready %s (heartbeat %s)", c.Status, c.LastHeartbeatTime.UTC().Format(time.RFC3339))
			}
		}
		t.Logf("node %s: %s, unschedulable %v, taints %v, allocatable pods %s, pods by phase %v",
			n.Name, ready, n.Spec.Unschedulable, n.Spec.Taints, n.Status.Allocatable.Pods(), pods[n.Name])
	}
	t.Logf("pods bound to no node, by phase: %v", pods[""])
}

// kubeSpec is the kubernetes provisioner spec of the tests, with a rollout timeout of
// timeoutSeconds; extra is spliced into the object.
func kubeSpec(t testing.TB, ns string, timeoutSeconds int, extra string) string {
	return fmt.Sprintf(`{"host": "http://*.rt.test", "namespace": %q, "image": "rilldata/rill",
		"kubeconfig_path": %q, "timeout_seconds": %d, "data_dir": "/mnt/data"%s}`, ns, kubeconfigPath(t), timeoutSeconds, extra)
}

// provisionerSet is a set of the one kubernetes provisioner with spec.
func provisionerSet(spec string) string {
	return fmt.Sprintf(`{%q: {"type": "kubernetes", "spec": %s}}`, provisioner, spec)
}

// startAgent runs the agent with timings short enough for tests: a failed attempt is retried
// within 2s, every resource and the provisioner are health-checked every second.
func startAgent(e *e2etest.Env, extra ...string) *e2etest.Agent {
	return startAgentAs(e, "e2e-k8s-agent", extra...)
}

// startAgentAs runs the agent under agent id with the timings of startAgent, then extra.
func startAgentAs(e *e2etest.Env, id string, extra ...string) *e2etest.Agent {
	return e.StartAgent(id, append([]string{
		"--concurrency", "8",
		"--poll-interval", "200ms",
		"--backoff-base", "200ms",
		"--backoff-max", "2s",
		"--capacity-retry", "1s",
		"--health-interval", "1s",
		"--capacity-interval", "2s",
	}, extra...)...)
}

// selector selects the objects of the tests' provisioner, or of resource id when it is set.
func selector(id string) string {
	sel := berthk8s.LabelManagedBy + "=" + berthk8s.ManagedBy + "," + berthk8s.LabelProvisioner + "=" + provisioner
	if id != "" {
		sel += "," + berthk8s.LabelResourceID + "=" + id
	}
	return sel
}

// berthLabels are the labels Berth puts on an object of resource id of provisioner prov.
func berthLabels(prov, id string) map[string]string {
	return map[string]string{
		berthk8s.LabelManagedBy: berthk8s.ManagedBy, berthk8s.LabelProvisioner: prov,
		berthk8s.LabelResourceID: id, berthk8s.LabelResourceType: "runtime",
	}
}

func deploymentOf(t testing.TB, cs kubernetes.Interface, ns, id string) *appsv1.Deployment {
	t.Helper()
	l, err := cs.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector(id)})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("resource %s has %d deployments, want 1", id, len(l.Items))
	}
	return &l.Items[0]
}

func rolledOut(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.Replicas == 1 && d.Status.AvailableReplicas == 1
}

func image(d *appsv1.Deployment) string { return d.Spec.Template.Spec.Containers[0].Image }

// leftovers lists every object of the provisioner left in ns (pods included) and every
// persistent volume still bound to a claim of ns.
func leftovers(t testing.TB, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: selector("")}
	var out []string
	add := func(kind string, err error, names ...string) {
		if err != nil {
			t.Fatalf("list %s: %v", kind, err)
		}
		for _, n := range names {
			out = append(out, kind+"/"+n)
		}
	}
	if l, err := cs.AppsV1().Deployments(ns).List(ctx, opts); err != nil {
		add("deployments", err)
	} else {
		for _, o := range l.Items {
			add("deployment", nil, o.Name)
		}
	}
	if l, err := cs.AppsV1().StatefulSets(ns).List(ctx, opts); err != nil {
		add("statefulsets", err)
	} else {
		for _, o := range l.Items {
			add("statefulset", nil, o.Name)
		}
	}
	if l, err := cs.CoreV1().Services(ns).List(ctx, opts); err != nil {
		add("services", err)
	} else {
		for _, o := range l.Items {
			add("service", nil, o.Name)
		}
	}
	if l, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts); err != nil {
		add("persistentvolumeclaims", err)
	} else {
		for _, o := range l.Items {
			add("persistentvolumeclaim", nil, o.Name)
		}
	}
	if l, err := cs.CoreV1().Secrets(ns).List(ctx, opts); err != nil {
		add("secrets", err)
	} else {
		for _, o := range l.Items {
			add("secret", nil, o.Name)
		}
	}
	if l, err := cs.NetworkingV1().Ingresses(ns).List(ctx, opts); err != nil {
		add("ingresses", err)
	} else {
		for _, o := range l.Items {
			add("ingress", nil, o.Name)
		}
	}
	if l, err := cs.CoreV1().Pods(ns).List(ctx, opts); err != nil {
		add("pods", err)
	} else {
		for _, o := range l.Items {
			add("pod", nil, o.Name)
		}
	}
	if l, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); err != nil {
		add("persistentvolumes", err)
	} else {
		for _, o := range l.Items {
			if ref := o.Spec.ClaimRef; ref != nil && ref.Namespace == ns {
				add("persistentvolume", nil, o.Name)
			}
		}
	}
	return out
}

// cordon marks every node unschedulable until the returned function (also run when the
// test ends) makes them schedulable again: pods created meanwhile stay Pending.
func cordon(t testing.TB, cs kubernetes.Interface) func() {
	t.Helper()
	set := func(unschedulable bool) error {
		nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		patch := []byte(fmt.Sprintf(`{"spec": {"unschedulable": %t}}`, unschedulable))
		for _, n := range nodes.Items {
			if _, err := cs.CoreV1().Nodes().Patch(context.Background(), n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
		return nil
	}
	if err := set(true); err != nil {
		t.Fatalf("cordon nodes: %v", err)
	}
	var once sync.Once
	uncordon := func() {
		once.Do(func() {
			if err := set(false); err != nil {
				t.Errorf("uncordon nodes: %v", err)
			}
		})
	}
	t.Cleanup(uncordon)
	return uncordon
}

// waitGone polls until leftovers finds nothing of the provisioner in ns.
func waitGone(t testing.TB, cs kubernetes.Interface, ns string, within time.Duration) {
	t.Helper()
	e2etest.Eventually(t, "every object of the provisioner gone", within, func() (bool, string) {
		left := leftovers(t, cs, ns)
		return len(left) == 0, strings.Join(left, ", ")
	})
}

// runConcurrently runs fn for 0..n-1 with at most width at once.
func runConcurrently(n, width int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// creations counts the Berth-labelled objects created in a namespace, by watching it: how
// many times each one was added, so that an object deleted and created again counts twice.
type creations struct {
	mu       sync.Mutex
	added    map[string]int // by kind/name
	first    time.Time
	last     time.Time
	watchers []watch.Interface
	wg       sync.WaitGroup
}

// watchCreations starts watching every kind the runtime templates render in the empty
// namespace ns; the watches end with the test.
func watchCreations(t testing.TB, cs kubernetes.Interface, ns string) *creations {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: selector("")}
	c := &creations{added: map[string]int{}}
	for kind, start := range map[string]func() (watch.Interface, error){
		"persistentvolumeclaim": func() (watch.Interface, error) { return cs.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, opts) },
		"service":               func() (watch.Interface, error) { return cs.CoreV1().Services(ns).Watch(ctx, opts) },
		"deployment":            func() (watch.Interface, error) { return cs.AppsV1().Deployments(ns).Watch(ctx, opts) },
		"ingress":               func() (watch.Interface, error) { return cs.NetworkingV1().Ingresses(ns).Watch(ctx, opts) },
	} {
		w, err := start()
		if err != nil {
			t.Fatalf("watch %ss: %v", kind, err)
		}
		c.watchers = append(c.watchers, w)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added {
					continue
				}
				m, ok := ev.Object.(metav1.Object)
				if !ok {
					continue
				}
				c.mu.Lock()
				c.added[kind+"/"+m.GetName()]++
				c.last = time.Now()
				if c.first.IsZero() {
					c.first = c.last
				}
				c.mu.Unlock()
			}
		}()
	}
	t.Cleanup(func() { c.stop() })
	return c
}

// stop ends the watches and returns how many distinct objects were created and when the
// last one was.
func (c *creations) stop() (int, time.Time) {
	for _, w := range c.watchers {
		w.Stop()
	}
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.added), c.last
}

// firstAt is when the first object was seen created (zero: none yet).
func (c *creations) firstAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

// ofKind is how many distinct objects of kind were created so far.
func (c *creations) ofKind(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for key := range c.added {
		if strings.HasPrefix(key, kind+"/") {
			n++
		}
	}
	return n
}

// createdTwice lists the objects added more than once so far, with their counts.
func (c *creations) createdTwice() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for key, n := range c.added {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s (%d times)", key, n))
		}
	}
	sort.Strings(out)
	return out
}
