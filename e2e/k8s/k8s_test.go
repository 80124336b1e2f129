//go:build k8s

package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/kubernetes"
)

const provisioner = "k8s"

// allowVolumeExpansion lets the default StorageClass grow claims, which resizing a runtime
// needs; the API refuses to grow claims of a class that does not allow it.
func allowVolumeExpansion(t testing.TB, cs k8s.Interface) {
	t.Helper()
	ctx := context.Background()
	classes, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range classes.Items {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" || (sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion) {
			continue
		}
		yes := true
		sc.AllowVolumeExpansion = &yes
		if _, err := cs.StorageV1().StorageClasses().Update(ctx, &sc, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("allow volume expansion on storage class %s: %v", sc.Name, err)
		}
	}
}

func selector(id string) string {
	sel := kubernetes.LabelManagedBy + "=" + kubernetes.ManagedBy + "," + kubernetes.LabelProvisioner + "=" + provisioner
	if id != "" {
		sel += "," + kubernetes.LabelResourceID + "=" + id
	}
	return sel
}

func deploymentOf(t testing.TB, cs k8s.Interface, ns, id string) *appsv1.Deployment {
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

// leftovers lists every object of the provisioner left in ns, pods included.
func leftovers(t testing.TB, cs k8s.Interface, ns string) []string {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: selector("")}
	var out []string
	add := func(kind string, names []string, err error) {
		if err != nil {
			t.Fatalf("list %s: %v", kind, err)
		}
		for _, n := range names {
			out = append(out, kind+"/"+n)
		}
	}
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, opts)
	add("deployment", names(deps, err), err)
	sts, err := cs.AppsV1().StatefulSets(ns).List(ctx, opts)
	add("statefulset", names(sts, err), err)
	svcs, err := cs.CoreV1().Services(ns).List(ctx, opts)
	add("service", names(svcs, err), err)
	pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
	add("pvc", names(pvcs, err), err)
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, opts)
	add("secret", names(secrets, err), err)
	ings, err := cs.NetworkingV1().Ingresses(ns).List(ctx, opts)
	add("ingress", names(ings, err), err)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, opts)
	add("pod", names(pods, err), err)
	return out
}

func names(list any, err error) []string {
	if err != nil {
		return nil
	}
	b, _ := json.Marshal(list)
	var l struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	_ = json.Unmarshal(b, &l)
	out := make([]string, len(l.Items))
	for i, it := range l.Items {
		out[i] = it.Metadata.Name
	}
	return out
}

// TestAgentLifecycle runs the agent on a kubernetes provisioner: concurrent provisioning, a
// resize, an upgrade, drift repair, an orphan sweep, ClickHouse, a SIGKILL mid-rollout and
// deprovisioning everything.
func TestAgentLifecycle(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	allowVolumeExpansion(t, cs)
	spec := kubeSpec(t, ns, "")
	e := newEnv(t, fmt.Sprintf(`{%q: {"type": "kubernetes", "spec": %s}}`, provisioner, spec))
	a := e.startAgent("--concurrency", "8")
	ctx := context.Background()

	// Several runtimes at once.
	ids := make([]string, 4)
	for i := range ids {
		ids[i] = e.create("--type", "runtime", "--name", fmt.Sprintf("rt-%d", i), "--owner", "team-a", "--arg", "slots=1")
	}
	eventually(t, "runtimes ready", 3*time.Minute, func() (bool, string) {
		return e.queryInt("SELECT count(*) FROM resources WHERE status = 'ready'") == len(ids), e.statusCounts()
	})
	for _, id := range ids {
		r := e.get(id)
		if !strings.Contains(r.Config["host"].(string), strings.ReplaceAll(id, "-", "")) || r.Config["cpu"] != float64(1) {
			t.Errorf("runtime %s config %v", id, r.Config)
		}
		if d := deploymentOf(t, cs, ns, id); !rolledOut(d) {
			t.Errorf("runtime %s ready but its deployment is not rolled out: %+v", id, d.Status)
		}
	}

	// Resize: CPU, memory and the volume grow in place.
	e.berth("resource", "update", ids[0], "--arg", "slots=2", "--wait", "--timeout", "3m")
	d := deploymentOf(t, cs, ns, ids[0])
	if c := d.Spec.Template.Spec.Containers[0]; c.Resources.Requests.Cpu().String() != "2" || c.Resources.Limits.Memory().String() != "8Gi" || !rolledOut(d) {
		t.Errorf("after resize: resources %v, status %+v", c.Resources, d.Status)
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "80Gi" {
		t.Errorf("volume after resize: %s, want 80Gi", q.String())
	}
	if r := e.get(ids[0]); r.Config["cpu"] != float64(2) || r.Config["storage_bytes"] != float64(80<<30) {
		t.Errorf("config after resize: %v", r.Config)
	}

	// Shrinking keeps the volume and says so.
	e.berth("resource", "update", ids[0], "--arg", "slots=1", "--wait", "--timeout", "3m")
	if r := e.get(ids[0]); !strings.Contains(r.StatusMessage, "volume not shrunk: 40Gi requested, 80Gi kept") {
		t.Errorf("status after a shrink: %q", r.StatusMessage)
	}

	// Upgrade: the version becomes the image tag.
	e.berth("resource", "update", ids[1], "--arg", "version=0.51.0", "--wait", "--timeout", "3m")
	if d := deploymentOf(t, cs, ns, ids[1]); d.Spec.Template.Spec.Containers[0].Image != "rilldata/rill:0.51.0" || !rolledOut(d) {
		t.Errorf("after upgrade: image %s, status %+v", d.Spec.Template.Spec.Containers[0].Image, d.Status)
	}

	// ClickHouse: a DSN with a generated password; the password is nowhere else.
	chID := e.create("--type", "clickhouse", "--name", "events", "--owner", "team-a", "--wait", "--timeout", "3m")
	ch := e.get(chID)
	dsn, _ := ch.Config["dsn"].(string)
	if !strings.HasPrefix(dsn, "clickhouse://default:") || !strings.HasSuffix(dsn, "."+ns+".svc:9000/default") {
		t.Errorf("clickhouse dsn %q", dsn)
	}
	password := strings.TrimPrefix(strings.SplitN(dsn, "@", 2)[0], "clickhouse://default:")
	if len(password) < 32 || strings.Contains(ch.StatusMessage, password) {
		t.Errorf("clickhouse password %d chars, status %q", len(password), ch.StatusMessage)
	}
	if strings.Contains(a.logs.String(), password) {
		t.Error("the agent logged the clickhouse password")
	}

	// Kill the agent during a rollout; the restarted agent converges.
	e.berth("resource", "update", ids[3], "--arg", "version=0.52.0")
	eventually(t, "upgrade under way", time.Minute, func() (bool, string) {
		d := deploymentOf(t, cs, ns, ids[3])
		return d.Spec.Template.Spec.Containers[0].Image == "rilldata/rill:0.52.0", d.Spec.Template.Spec.Containers[0].Image
	})
	a.kill9(t)
	b := e.startAgent("--concurrency", "8")
	eventually(t, "upgrade converges after the restart", 3*time.Minute, func() (bool, string) {
		r := e.get(ids[3])
		return r.Status == "ready" && r.ObservedGeneration == r.Generation, r.Status + ": " + r.StatusMessage
	})
	if d := deploymentOf(t, cs, ns, ids[3]); d.Spec.Template.Spec.Containers[0].Image != "rilldata/rill:0.52.0" || !rolledOut(d) {
		t.Errorf("after restart: image %s, status %+v", d.Spec.Template.Spec.Containers[0].Image, d.Status)
	}
	if n := len(leftovers(t, cs, ns)); n == 0 {
		t.Fatal("no objects while resources exist")
	}

	// Deprovision everything: nothing of the provisioner is left.
	for _, id := range append(ids, chID) {
		e.berth("resource", "delete", id, "--wait", "--timeout", "3m")
	}
	eventually(t, "every object gone", 2*time.Minute, func() (bool, string) {
		left := leftovers(t, cs, ns)
		return len(left) == 0, strings.Join(left, ", ")
	})
	b.stop(t)
}

// openEnviron builds the kubernetes environ the agent would, on the test database.
func openEnviron(t testing.TB, e *env, spec string) (environ.Environ, *postgres.State) {
	t.Helper()
	state, err := postgres.Open(context.Background(), e.dbURL, postgres.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(state.Close)
	env, err := kubernetes.New(provisioner, json.RawMessage(spec), environ.Deps{Resources: state})
	if err != nil {
		t.Fatalf("kubernetes.New: %v", err)
	}
	t.Cleanup(func() { env.Close() })
	return env, state
}

// TestEnvironRepairAndSweep drives the environ directly against the cluster: a Deployment
// deleted out of band is repaired by CheckResource, and Check sweeps objects of a resource
// that does not exist while leaving live and unlabelled objects alone.
func TestEnvironRepairAndSweep(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	spec := kubeSpec(t, ns, "")
	e := newEnv(t, fmt.Sprintf(`{%q: {"type": "kubernetes", "spec": %s}}`, provisioner, spec))
	env, _ := openEnviron(t, e, spec)
	ctx := context.Background()

	// A live resource row, provisioned through the environ.
	id := e.create("--type", "runtime", "--name", "live", "--owner", "team-a", "--provisioner", provisioner, "--arg", "slots=1")
	r := &environ.Resource{ID: id, Type: domain.ResourceTypeRuntime}
	opts := &environ.ResourceOptions{Args: map[string]any{"slots": 1}}
	res, err := env.Reconcile(ctx, r, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.AwaitReady(ctx, res); err != nil {
		t.Fatal(err)
	}

	// Delete the Deployment out of band: CheckResource puts it back and says so.
	d := deploymentOf(t, cs, ns, id)
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deployment gone", 30*time.Second, func() (bool, string) {
		_, err := cs.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	checked, err := env.CheckResource(ctx, r, opts)
	if err != nil {
		t.Fatalf("CheckResource: %v", err)
	}
	if want := "deployment " + d.Name + " re-applied: missing"; len(checked.Repairs) != 1 || !strings.HasPrefix(checked.Repairs[0], want) {
		t.Errorf("repairs = %q, want %q...", checked.Repairs, want)
	}
	if err := env.AwaitReady(ctx, checked); err != nil {
		t.Fatalf("repaired deployment not ready: %v", err)
	}
	if again, err := env.CheckResource(ctx, r, opts); err != nil || len(again.Repairs) != 0 {
		t.Errorf("CheckResource after the repair: %v, repairs %q", err, again.Repairs)
	}

	// Scale it out of band: put back too.
	d = deploymentOf(t, cs, ns, id)
	three := int32(3)
	d.Spec.Replicas = &three
	if _, err := cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	checked, err = env.CheckResource(ctx, r, opts)
	if err != nil || len(checked.Repairs) != 1 || !strings.Contains(checked.Repairs[0], "replicas changed out of band (3, want 1)") {
		t.Errorf("CheckResource after scaling: %v, repairs %q", err, checked.Repairs)
	}
	if d := deploymentOf(t, cs, ns, id); d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas not put back: %v", d.Spec.Replicas)
	}

	// Orphans: objects labelled for a resource id that has no row; and a stranger.
	orphan := uuid.NewString()
	labels := map[string]string{
		kubernetes.LabelManagedBy: kubernetes.ManagedBy, kubernetes.LabelProvisioner: provisioner,
		kubernetes.LabelResourceID: orphan, kubernetes.LabelResourceType: "runtime",
	}
	orphanSvc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan-svc", Labels: labels},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, orphanSvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "orphan-secret", Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stranger := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "stranger", Labels: map[string]string{kubernetes.LabelResourceID: orphan}}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, stranger, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	eventually(t, "orphans swept", 30*time.Second, func() (bool, string) {
		_, e1 := cs.CoreV1().Services(ns).Get(ctx, "orphan-svc", metav1.GetOptions{})
		_, e2 := cs.CoreV1().Secrets(ns).Get(ctx, "orphan-secret", metav1.GetOptions{})
		return apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2), fmt.Sprint(e1, e2)
	})
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, "stranger", metav1.GetOptions{}); err != nil {
		t.Errorf("unlabelled secret swept: %v", err)
	}
	if d := deploymentOf(t, cs, ns, id); d.DeletionTimestamp != nil {
		t.Error("live resource's deployment swept")
	}

	if err := env.Deprovision(ctx, r); err != nil {
		t.Fatalf("Deprovision: %v", err)
	}
	eventually(t, "everything gone", time.Minute, func() (bool, string) {
		left := leftovers(t, cs, ns)
		return len(left) == 0, strings.Join(left, ", ")
	})
}

// TestAwaitReadySaysWhy asks for more CPU than any node has and checks the timeout error
// carries the scheduler's reason.
func TestAwaitReadySaysWhy(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	spec := kubeSpec(t, ns, `, "cpu_per_slot": 1000`)
	spec = strings.Replace(spec, `"timeout_seconds": 90`, `"timeout_seconds": 5`, 1)
	e := newEnv(t, fmt.Sprintf(`{%q: {"type": "kubernetes", "spec": %s}}`, provisioner, spec))
	env, _ := openEnviron(t, e, spec)
	ctx := context.Background()
	r := &environ.Resource{ID: uuid.NewString(), Type: domain.ResourceTypeRuntime}
	res, err := env.Reconcile(ctx, r, &environ.ResourceOptions{Args: map[string]any{"slots": 1}})
	if err != nil {
		t.Fatal(err)
	}
	err = env.AwaitReady(ctx, res)
	if err == nil || !strings.Contains(err.Error(), "not ready within 5s") || !strings.Contains(err.Error(), "Insufficient cpu") {
		t.Errorf("AwaitReady = %v, want a timeout naming insufficient cpu", err)
	}
	if err := env.Deprovision(ctx, r); err != nil {
		t.Fatal(err)
	}
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
