//go:build k8s

package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/kubernetes"
	"github.com/berth-dev/berth/internal/e2etest"
)

// Bounds of the waits below. Everything runs on fake nodes, where a rollout takes a second or
// two; the bounds leave room for a loaded machine.
const (
	readyWithin  = 2 * time.Minute
	repairWithin = time.Minute
)

// lifecycleTimeout is the lifecycle provisioner's timeout_seconds: short, so that a rollout
// that cannot finish is reported (with its reason) within the test.
const lifecycleTimeout = 8

// TestAgentLifecycle runs the real agent on a kubernetes provisioner: concurrent provisioning,
// a resize (and a refused shrink), an upgrade, out-of-band deletions repaired, an orphan
// swept, ClickHouse with its password kept out of the row, status and logs, a rollout that cannot be
// scheduled reported with its reason, a SIGKILL during that rollout and convergence after the
// restart, and deprovisioning everything, leaving objects without Berth's labels alone.
func TestAgentLifecycle(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	requireVolumeExpansion(t, cs)
	ctx := context.Background()
	e := e2etest.New(t, provisionerSet(kubeSpec(t, ns, lifecycleTimeout, "")))
	strangers := createStrangers(t, cs, ns)
	a := startAgent(e)

	// Several runtimes, provisioned concurrently.
	ids := make([]string, 4)
	for i := range ids {
		ids[i] = e.Create("--type", "runtime", "--name", fmt.Sprintf("rt-%d", i), "--owner", "team-a", "--arg", "slots=1")
	}
	e.WaitCount("all runtimes ready", readyWithin, len(ids), "SELECT count(*) FROM resources WHERE status = 'ready'")
	for _, id := range ids {
		r := e.Get(id)
		if host, _ := r.Config["host"].(string); host != "http://"+strings.ReplaceAll(id, "-", "")+".rt.test" || r.Config["cpu"] != float64(1) || r.Provisioner != provisioner {
			t.Errorf("runtime %s: provisioner %q, config %v", id, r.Provisioner, r.Config)
		}
		d := deploymentOf(t, cs, ns, id)
		if !rolledOut(d) {
			t.Errorf("runtime %s ready but its deployment is not rolled out: %+v", id, d.Status)
		}
		if pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, d.Name, metav1.GetOptions{}); err != nil || pvc.Status.Phase != corev1.ClaimBound {
			t.Errorf("runtime %s volume: %v %v", id, err, pvc.Status.Phase)
		}
	}

	// Resize: CPU, memory and the volume grow in place.
	e.Berth("resource", "update", ids[0], "--arg", "slots=2", "--wait", "--timeout", "3m")
	d := deploymentOf(t, cs, ns, ids[0])
	if c := d.Spec.Template.Spec.Containers[0]; c.Resources.Requests.Cpu().String() != "2" || c.Resources.Limits.Memory().String() != "8Gi" || !rolledOut(d) {
		t.Errorf("after resize: resources %v, status %+v", c.Resources, d.Status)
	}
	if q := claimSize(t, cs, ns, d.Name); q != "80Gi" {
		t.Errorf("volume after resize: %s, want 80Gi", q)
	}
	if r := e.Get(ids[0]); r.Config["cpu"] != float64(2) || r.Config["storage_bytes"] != float64(80<<30) {
		t.Errorf("config after resize: %v", r.Config)
	}

	// Shrinking keeps the volume, and the status says so.
	e.Berth("resource", "update", ids[0], "--arg", "slots=1", "--wait", "--timeout", "3m")
	if r := e.Get(ids[0]); !strings.Contains(r.StatusMessage, "volume not shrunk: 40Gi requested, 80Gi kept") || r.Config["cpu"] != float64(1) || r.Config["storage_bytes"] != float64(80<<30) {
		t.Errorf("after a shrink: status %q, config %v", r.StatusMessage, r.Config)
	}
	if q := claimSize(t, cs, ns, d.Name); q != "80Gi" {
		t.Errorf("volume after a shrink: %s, want 80Gi kept", q)
	}

	// Upgrade: the version becomes the image tag.
	e.Berth("resource", "update", ids[1], "--arg", "version=0.51.0", "--wait", "--timeout", "3m")
	if d := deploymentOf(t, cs, ns, ids[1]); image(d) != "rilldata/rill:0.51.0" || !rolledOut(d) {
		t.Errorf("after upgrade: image %s, status %+v", image(d), d.Status)
	}

	// Out of band, delete one runtime's Deployment and another's Service: the agent's health
	// checks put them back and record the repairs.
	upgraded := deploymentOf(t, cs, ns, ids[1])
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, upgraded.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	svcName := "rt-" + strings.ReplaceAll(ids[2], "-", "")
	svc, err := cs.CoreV1().Services(ns).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Services(ns).Delete(ctx, svcName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the deleted service is re-created", repairWithin, func() (bool, string) {
		s, err := cs.CoreV1().Services(ns).Get(ctx, svcName, metav1.GetOptions{})
		return err == nil && s.UID != svc.UID, fmt.Sprint(err)
	})
	e.Eventually("the deleted deployment is re-created and rolled out", repairWithin, func() (bool, string) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, upgraded.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.UID != upgraded.UID && image(d) == "rilldata/rill:0.51.0" && rolledOut(d), fmt.Sprintf("%s %+v", image(d), d.Status)
	})
	waitRepairEvent(t, e, ids[1], "deployment "+upgraded.Name+" re-applied: missing")
	waitRepairEvent(t, e, ids[2], "service "+svcName+" re-applied: missing")
	e.WaitReady(ids[1], repairWithin)
	e.WaitReady(ids[2], repairWithin)

	// An orphan (Berth's labels, this provisioner, a resource that does not exist) is swept.
	orphan := berthLabels(provisioner, uuid.NewString())
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: orphan},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: orphan}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the orphans are swept", repairWithin, func() (bool, string) {
		_, e1 := cs.CoreV1().Services(ns).Get(ctx, "orphan", metav1.GetOptions{})
		_, e2 := cs.CoreV1().ConfigMaps(ns).Get(ctx, "orphan", metav1.GetOptions{})
		return apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2), fmt.Sprintf("service: %v; configmap: %v", e1, e2)
	})
	strangers.check(t)

	// ClickHouse: the config has a DSN without password and names the Secret holding it, which
	// a client reads with its own credentials; the password is nowhere in the row.
	chID := e.Create("--type", "clickhouse", "--name", "events", "--owner", "team-a", "--wait", "--timeout", "3m")
	ch := e.Get(chID)
	chName := "ch-" + strings.ReplaceAll(chID, "-", "")
	wantConfig := map[string]any{
		"dsn":                       "clickhouse://default@" + chName + "." + ns + ".svc:9000/default",
		"password_secret_namespace": ns,
		"password_secret_name":      chName + "-auth",
		"password_secret_key":       "password",
	}
	if fmt.Sprint(ch.Config) != fmt.Sprint(wantConfig) {
		t.Fatalf("clickhouse config %v, want %v", ch.Config, wantConfig)
	}
	secret, err := cs.CoreV1().Secrets(ch.Config["password_secret_namespace"].(string)).Get(ctx, ch.Config["password_secret_name"].(string), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("clickhouse secret named by the config: %v", err)
	}
	password := string(secret.Data[ch.Config["password_secret_key"].(string)])
	if len(password) < 32 {
		t.Fatalf("the secret's password has %d bytes, want at least 32", len(password))
	}
	passwordInRow := `SELECT count(*) FROM resources r WHERE strpos(r::text, $1) > 0`
	if n := e.QueryInt(passwordInRow, password); n != 0 {
		t.Errorf("%d resource rows carry the clickhouse password", n)
	}
	if out := e.Berth("resource", "get", chID, "-o", "json"); strings.Contains(out, password) {
		t.Error("berth resource get prints the clickhouse password")
	}
	if sts, err := cs.AppsV1().StatefulSets(ns).Get(ctx, chName, metav1.GetOptions{}); err != nil || sts.Status.ReadyReplicas != 1 {
		t.Errorf("clickhouse statefulset: %v", err)
	} else if strings.Contains(fmt.Sprint(sts.Spec.Template), password) {
		t.Error("the clickhouse password is in the statefulset, not only in its secret")
	}
	// A row written when the DSN carried the password loses it at the next health check, and
	// the Secret keeps its password.
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET config = jsonb_build_object('dsn', $1::text) WHERE id = $2`,
		"clickhouse://default:"+password+"@"+chName+"."+ns+".svc:9000/default", chID); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the older config's password leaves the row", repairWithin, func() (bool, string) {
		n := e.QueryInt(passwordInRow, password)
		return n == 0, fmt.Sprintf("%d rows carry the password", n)
	})
	if ch = e.Get(chID); fmt.Sprint(ch.Config) != fmt.Sprint(wantConfig) {
		t.Errorf("clickhouse config after the rewrite %v, want %v", ch.Config, wantConfig)
	}
	if s, err := cs.CoreV1().Secrets(ns).Get(ctx, chName+"-auth", metav1.GetOptions{}); err != nil || string(s.Data["password"]) != password {
		t.Errorf("the clickhouse secret's password changed (or the secret is gone: %v)", err)
	}

	// A rollout that cannot be scheduled: the status says why; the agent is killed during
	// the rollout, and the restarted agent sees it through once the nodes take pods again.
	uncordon := cordon(t, cs)
	e.Berth("resource", "update", ids[3], "--arg", "version=0.52.0")
	// The failed attempt's status stays only until the retry starts, so look in the history.
	stuck := waitEvent(t, e, ids[3], func(kind, message string) bool {
		return strings.Contains(message, fmt.Sprintf("not ready within %ds", lifecycleTimeout)) && strings.Contains(message, "not scheduled: Unschedulable")
	})
	t.Logf("stuck rollout reported as: %s", stuck)
	if !strings.Contains(stuck, "node(s) were unschedulable") {
		t.Errorf("status does not give the scheduler's reason: %q", stuck)
	}
	if r := e.Get(ids[3]); r.Status != "provisioning" || r.ObservedGeneration != 1 {
		t.Fatalf("mid-rollout: %s", r)
	}
	if d := deploymentOf(t, cs, ns, ids[3]); image(d) != "rilldata/rill:0.52.0" || rolledOut(d) {
		t.Fatalf("mid-rollout: image %s, status %+v", image(d), d.Status)
	}
	a.Kill9(t)
	b := startAgent(e)
	uncordon()
	r := e.WaitReady(ids[3], readyWithin)
	if r.ObservedGeneration != 2 {
		t.Errorf("after the restart: %s", r)
	}
	if d := deploymentOf(t, cs, ns, ids[3]); image(d) != "rilldata/rill:0.52.0" || !rolledOut(d) {
		t.Errorf("after the restart: image %s, status %+v", image(d), d.Status)
	}

	// The password is in no row (status, error, state or config), event or log line.
	if n := e.QueryInt(passwordInRow, password); n != 0 {
		t.Errorf("%d resource rows carry the clickhouse password", n)
	}
	if n := e.QueryInt(`SELECT count(*) FROM resource_events WHERE strpos(message, $1) > 0`, password); n != 0 {
		t.Errorf("%d events carry the clickhouse password", n)
	}
	for name, logs := range map[string]string{"first": a.Logs(), "restarted": b.Logs()} {
		if strings.Contains(logs, password) {
			t.Errorf("the %s agent logged the clickhouse password", name)
		}
	}

	// Deprovision everything at once: nothing of the provisioner is left, volumes included,
	// and objects without its labels are untouched.
	all := append(append([]string{}, ids...), chID)
	runConcurrently(len(all), len(all), func(i int) {
		if _, stderr, err := e.TryBerth("resource", "delete", all[i]); err != nil {
			t.Errorf("delete %s: %v: %s", all[i], err, stderr)
		}
	})
	e.WaitCount("every resource deprovisioned", readyWithin, 0, "SELECT count(*) FROM resources")
	waitGone(t, cs, ns, repairWithin)
	strangers.check(t)
	b.Stop(t)
}

// requireVolumeExpansion fails unless the default StorageClass lets claims grow, which
// resizing a runtime needs (the cluster scripts make it so).
func requireVolumeExpansion(t testing.TB, cs k8s.Interface) {
	t.Helper()
	classes, err := cs.StorageV1().StorageClasses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range classes.Items {
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
				t.Fatalf("the default storage class %s does not allow volume expansion: re-run scripts/k8s/up.sh, which allows it", sc.Name)
			}
			return
		}
	}
	t.Fatal("the cluster has no default storage class: start it with scripts/k8s/up.sh")
}

func claimSize(t testing.TB, cs k8s.Interface, ns, name string) string {
	t.Helper()
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return q.String()
}

// waitRepairEvent waits until resource id has a repair event starting with want.
func waitRepairEvent(t testing.TB, e *e2etest.Env, id, want string) {
	t.Helper()
	waitEvent(t, e, id, func(kind, message string) bool {
		return kind == "repair" && strings.HasPrefix(message, want)
	})
}

// waitEvent waits until `berth resource events` shows an event of resource id that match
// accepts, and returns its message.
func waitEvent(t testing.TB, e *e2etest.Env, id string, match func(kind, message string) bool) string {
	t.Helper()
	var found string
	e.Eventually("event of resource "+id, readyWithin, func() (bool, string) {
		var events []struct {
			Kind    string `json:"kind"`
			Message string `json:"message"`
		}
		out := e.Berth("resource", "events", id, "-o", "json")
		if err := json.Unmarshal([]byte(out), &events); err != nil {
			return false, err.Error()
		}
		for _, ev := range events {
			if match(ev.Kind, ev.Message) {
				found = ev.Message
				return true, ""
			}
		}
		return false, out
	})
	return found
}

// strangers are objects in the test namespace that Berth must leave alone: one without
// labels, one with only a resource-id label, and one of another provisioner.
type strangers struct {
	cs   k8s.Interface
	ns   string
	uids map[string]types.UID
}

func createStrangers(t testing.TB, cs k8s.Interface, ns string) *strangers {
	t.Helper()
	ctx := context.Background()
	s := &strangers{cs: cs, ns: ns, uids: map[string]types.UID{}}
	for name, labels := range map[string]map[string]string{
		"unlabelled":        nil,
		"resource-id-only":  {kubernetes.LabelResourceID: uuid.NewString()},
		"other-provisioner": berthLabels("other", uuid.NewString()),
	} {
		c, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.uids[name] = c.UID
	}
	return s
}

// check fails the test unless every stranger is still there, undeleted and unchanged.
func (s *strangers) check(t testing.TB) {
	t.Helper()
	for name, uid := range s.uids {
		c, err := s.cs.CoreV1().ConfigMaps(s.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || c.UID != uid || c.DeletionTimestamp != nil {
			t.Errorf("configmap %s, which Berth must not touch, was deleted or replaced: %v", name, err)
		}
	}
}

// openEnviron builds the kubernetes environ the agent would, looking resources up in the
// test database.
func openEnviron(t testing.TB, e *e2etest.Env, spec string) environ.Environ {
	t.Helper()
	state, err := postgres.Open(context.Background(), e.DatabaseURL, postgres.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(state.Close)
	env, err := kubernetes.New(provisioner, json.RawMessage(spec), environ.Deps{Resources: state})
	if err != nil {
		t.Fatalf("kubernetes.New: %v", err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

// TestEnvironRepairAndSweep drives the environ directly against the cluster: a Deployment
// deleted out of band is repaired by CheckResource, so is one scaled out of band, and Check
// sweeps objects of a resource that does not exist while leaving live and unlabelled objects
// alone.
func TestEnvironRepairAndSweep(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	spec := kubeSpec(t, ns, 90, "")
	e := e2etest.New(t, provisionerSet(spec))
	env := openEnviron(t, e, spec)
	ctx := context.Background()

	// A live resource row, provisioned through the environ.
	id := e.Create("--type", "runtime", "--name", "live", "--owner", "team-a", "--provisioner", provisioner, "--arg", "slots=1")
	r := &environ.Resource{ID: id, Type: domain.ResourceTypeRuntime}
	opts := &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1}
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
	e.Eventually("deployment gone", 30*time.Second, func() (bool, string) {
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

	// Orphans: objects labelled for a resource id that has no row; and strangers.
	orphan := berthLabels(provisioner, uuid.NewString())
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan-svc", Labels: orphan},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "orphan-secret", Labels: orphan}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	strangers := createStrangers(t, cs, ns)
	if err := env.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	e.Eventually("orphans swept", 30*time.Second, func() (bool, string) {
		_, e1 := cs.CoreV1().Services(ns).Get(ctx, "orphan-svc", metav1.GetOptions{})
		_, e2 := cs.CoreV1().Secrets(ns).Get(ctx, "orphan-secret", metav1.GetOptions{})
		return apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2), fmt.Sprint(e1, e2)
	})
	strangers.check(t)
	if d := deploymentOf(t, cs, ns, id); d.DeletionTimestamp != nil {
		t.Error("live resource's deployment swept")
	}

	if err := env.Deprovision(ctx, r); err != nil {
		t.Fatalf("Deprovision: %v", err)
	}
	waitGone(t, cs, ns, time.Minute)
	strangers.check(t)
}

// TestAwaitReadySaysWhy asks for more CPU than any node has: the timeout error carries the
// scheduler's reason, and a resize of the stuck runtime still rolls out (its claim, not
// bound while no pod is scheduled, keeps its size and the notice says so).
func TestAwaitReadySaysWhy(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	spec := kubeSpec(t, ns, 3, `, "cpu_per_slot": 1000`)
	e := e2etest.New(t, provisionerSet(spec))
	env := openEnviron(t, e, spec)
	ctx := context.Background()
	r := &environ.Resource{ID: uuid.NewString(), Type: domain.ResourceTypeRuntime}
	res, err := env.Reconcile(ctx, r, &environ.ResourceOptions{Args: map[string]any{"slots": 1}})
	if err != nil {
		t.Fatal(err)
	}
	err = env.AwaitReady(ctx, res)
	if err == nil || !strings.Contains(err.Error(), "not ready within 3s") || !strings.Contains(err.Error(), "Insufficient cpu") {
		t.Errorf("AwaitReady = %v, want a timeout naming insufficient cpu", err)
	}

	res, err = env.Reconcile(ctx, r, &environ.ResourceOptions{Args: map[string]any{"slots": 2}})
	if err != nil {
		t.Fatalf("resize of a runtime whose claim is pending: %v", err)
	}
	if want := "volume not grown yet: 80Gi requested, 40Gi kept until the claim is bound"; !strings.HasPrefix(res.Notice, want) {
		t.Errorf("notice %q, want %q...", res.Notice, want)
	}
	d := deploymentOf(t, cs, ns, r.ID)
	if cpu := d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(); cpu != "2k" {
		t.Errorf("deployment cpu %s after the resize, want 2k", cpu)
	}
	if q := claimSize(t, cs, ns, d.Name); q != "40Gi" {
		t.Errorf("pending claim %s, want 40Gi kept", q)
	}
	if err := env.Deprovision(ctx, r); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cs, ns, time.Minute)
}
