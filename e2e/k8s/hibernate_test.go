//go:build k8s

package k8s_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/environ/kubernetes"
	"github.com/berth-dev/berth/internal/e2etest"
)

// TestHibernateAndWake runs the real agent on a kubernetes provisioner and drives the
// controls through plain SQL: hibernating a ready runtime scales its Deployment to zero (no
// pod left) and keeps its volume claim, Service and Ingresses; waking it rolls it out again
// with its data volume the same claim (same UID, same volume) and the pod template
// unchanged. Health checks leave the hibernated runtime alone. Labels set meanwhile are on
// its objects under label.berth.dev/ when it wakes.
func TestHibernateAndWake(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	e := e2etest.New(t, provisionerSet(kubeSpec(t, ns, 90, "")))
	a := startAgent(e)

	id := e.Create("--type", "runtime", "--name", "sleepy", "--owner", "team-a", "--arg", "slots=1")
	awake := e.Create("--type", "runtime", "--name", "awake", "--owner", "team-a", "--arg", "slots=1")
	e.WaitReady(id, readyWithin)
	e.WaitReady(awake, readyWithin)
	d := deploymentOf(t, cs, ns, id)
	claim, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim %s is %s, want bound", claim.Name, claim.Status.Phase)
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET hibernate = true WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	r := e.WaitResource(id, "hibernated", readyWithin, func(r e2etest.Resource) bool { return r.Status == "hibernated" })
	t.Logf("hibernated: %s", r)
	asleep := deploymentOf(t, cs, ns, id)
	if asleep.Spec.Replicas == nil || *asleep.Spec.Replicas != 0 || asleep.Status.Replicas != 0 {
		t.Errorf("hibernated deployment: replicas %v, status %+v; want 0 and no pod", asleep.Spec.Replicas, asleep.Status)
	}
	if n := podsOf(t, cs, ns, id); n != 0 {
		t.Errorf("%d pods of the hibernated runtime left, want none", n)
	}
	if c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, d.Name, metav1.GetOptions{}); err != nil || c.UID != claim.UID {
		t.Errorf("claim while hibernated: %v (uid %v, want %v)", err, uidOf(c), claim.UID)
	}
	if s, err := cs.CoreV1().Services(ns).Get(ctx, d.Name, metav1.GetOptions{}); err != nil || s.UID != svc.UID {
		t.Errorf("service while hibernated: %v", err)
	}
	// Health checks leave it alone: once a check has repaired the other runtime's Service
	// (deleted out of band after the hibernate), it is still hibernated and at zero.
	awakeSvc := deploymentOf(t, cs, ns, awake).Name
	if err := cs.CoreV1().Services(ns).Delete(ctx, awakeSvc, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRepairEvent(t, e, awake, "service "+awakeSvc+" re-applied: missing")
	if r := e.Get(id); r.Status != "hibernated" {
		t.Errorf("after a few health-check rounds: %s", r)
	}
	if d := deploymentOf(t, cs, ns, id); d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		t.Errorf("a health check scaled the hibernated runtime to %v", d.Spec.Replicas)
	}

	// Labels set while hibernated are applied on wake, with the wake.
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET labels = '{"team": "data"}' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET hibernate = false WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	r = e.WaitReady(id, readyWithin)
	t.Logf("woken: %s", r)
	woken := deploymentOf(t, cs, ns, id)
	if !rolledOut(woken) {
		t.Errorf("woken deployment not rolled out: %+v", woken.Status)
	}
	if woken.UID != d.UID || !equality.Semantic.DeepEqual(woken.Spec.Template, d.Spec.Template) {
		t.Errorf("waking replaced the deployment (uid %s, was %s) or changed its pod template:\n%+v\nwas\n%+v", woken.UID, d.UID, woken.Spec.Template, d.Spec.Template)
	}
	c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil || c.UID != claim.UID || c.Spec.VolumeName != claim.Spec.VolumeName {
		t.Fatalf("claim after waking: %v (uid %v, want %v; volume %v, want %v)", err, uidOf(c), claim.UID, c.Spec.VolumeName, claim.Spec.VolumeName)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelResourceID + "=" + id})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods after waking: %v, %d; want 1", err, len(pods.Items))
	}
	mounted := ""
	for _, v := range pods.Items[0].Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			mounted = v.PersistentVolumeClaim.ClaimName
		}
	}
	if mounted != claim.Name {
		t.Errorf("woken pod mounts claim %q, want %q", mounted, claim.Name)
	}
	for kind, labels := range map[string]map[string]string{"deployment": woken.Labels, "claim": c.Labels} {
		if labels[kubernetes.LabelPrefix+"team"] != "data" {
			t.Errorf("woken %s labels %v, want %steam=data", kind, labels, kubernetes.LabelPrefix)
		}
	}

	e.Berth("resource", "delete", id)
	e.Berth("resource", "delete", awake)
	e.WaitCount("deprovisioned", readyWithin, 0, "SELECT count(*) FROM resources")
	waitGone(t, cs, ns, repairWithin)
	a.Stop(t)
}

// podsOf counts the pods of resource id that are not gone yet.
func podsOf(t testing.TB, cs k8s.Interface, ns, id string) int {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kubernetes.LabelResourceID + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

func uidOf(c *corev1.PersistentVolumeClaim) any {
	if c == nil {
		return nil
	}
	return c.UID
}
