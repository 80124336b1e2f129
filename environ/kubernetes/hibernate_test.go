package kubernetes

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// setDeploymentScaledDown reports the deployment's pods gone.
func setDeploymentScaledDown(t *testing.T, cs *fake.Clientset, name string) {
	t.Helper()
	d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation}
	if _, err := cs.AppsV1().Deployments("ns").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hibernate runs Hibernate until it waits for the workload's pods to go, reports them gone
// and returns what Hibernate returned.
func hibernate(t *testing.T, e *testEnv, cs *fake.Clientset, r *environ.Resource, opts *environ.ResourceOptions) *environ.Resource {
	t.Helper()
	watching := make(chan struct{}, 10)
	cs.PrependWatchReactor("deployments", func(k8stesting.Action) (bool, watch.Interface, error) {
		watching <- struct{}{}
		return false, nil, nil
	})
	type result struct {
		res *environ.Resource
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := e.Hibernate(t.Context(), r, opts)
		done <- result{res, err}
	}()
	select {
	case <-watching:
	case got := <-done:
		t.Fatalf("Hibernate returned %+v, %v before it watched for the pods to go", got.res, got.err)
	}
	select {
	case got := <-done:
		t.Fatalf("Hibernate returned %+v, %v before the pods were gone", got.res, got.err)
	default:
	}
	setDeploymentScaledDown(t, cs, "rt-"+strings.ReplaceAll(r.ID, "-", ""))
	got := <-done
	if got.err != nil {
		t.Fatalf("Hibernate: %v", got.err)
	}
	return got.res
}

// Hibernating scales the Deployment to zero and keeps every other object as it was (the
// claim, the Service, the Ingresses), and the checksums: waking only gives the replicas back,
// leaving the pod template as it was. A hibernated runtime holds none of the slot quota, and
// its health check repairs towards zero replicas, never scaling it up.
func TestHibernateScalesToZeroAndWakeScalesBack(t *testing.T) {
	e, cs := newTestEnviron(t, `{"host": "http://node-*.localhost", "namespace": "ns", "image": "rilldata/rill", "timeout_seconds": 30, "slot_quota": 4}`)
	ctx := t.Context()
	name := "rt-" + testPID
	opts := &environ.ResourceOptions{Args: map[string]any{"slots": 3}, Generation: 1}
	running := reconcile(t, e, runtimeResource(testID), opts.Args)
	setDeploymentAvailable(t, cs, name)
	before, err := cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	claim, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()

	asleep := hibernate(t, e, cs, &environ.Resource{ID: testID, Type: domain.ResourceTypeRuntime, State: running.State, Config: running.Config}, opts)
	if asleep.State["hibernated"] != true || asleep.State["checksum"] != running.State["checksum"] {
		t.Errorf("hibernated state = %v, want the running one's (%v) marked hibernated", asleep.State, running.State)
	}
	d, err := cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if replicas(d.Spec.Replicas) != 0 {
		t.Errorf("replicas after Hibernate = %d, want 0", replicas(d.Spec.Replicas))
	}
	if !reflect.DeepEqual(d.Spec.Template, before.Spec.Template) {
		t.Errorf("Hibernate changed the pod template:\n%+v\nwant\n%+v", d.Spec.Template, before.Spec.Template)
	}
	if kept, err := cs.CoreV1().PersistentVolumeClaims("ns").Get(ctx, name, metaGet); err != nil || !reflect.DeepEqual(kept.Spec, claim.Spec) {
		t.Errorf("claim after Hibernate: %v, %v; want it kept as it was", kept, err)
	}
	if _, err := cs.CoreV1().Services("ns").Get(ctx, name, metaGet); err != nil {
		t.Errorf("service after Hibernate: %v", err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("Hibernate deleted %s", a.GetResource().Resource)
		}
	}

	// The slots of a hibernated runtime are free for others.
	if c, err := e.Capacity(ctx); err != nil || c.Used != 0 {
		t.Errorf("capacity while hibernated: %+v, %v; want no slot used", c, err)
	}
	if _, err := e.Reconcile(ctx, runtimeResource(otherID), &environ.ResourceOptions{Args: map[string]any{"slots": 4}}); err != nil {
		t.Errorf("another runtime taking the whole quota while one is hibernated: %v", err)
	}
	if err := e.Deprovision(ctx, runtimeResource(otherID)); err != nil {
		t.Fatal(err)
	}

	// A check of the hibernated runtime does not scale it up, puts zero back when it was
	// scaled out of band, and does not ask for it to be available.
	res, err := e.CheckResource(ctx, &environ.Resource{ID: testID, Type: domain.ResourceTypeRuntime, State: asleep.State}, opts)
	if err != nil || len(res.Repairs) != 0 || res.State["hibernated"] != true {
		t.Errorf("check of a hibernated runtime: %+v, %v; want it healthy and left alone", res, err)
	}
	one := int32(1)
	d.Spec.Replicas = &one
	if _, err := cs.AppsV1().Deployments("ns").Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	e.resources.moved = map[string]domain.Resource{testID: {ID: testID, Generation: 1, Status: domain.StatusHibernated, Hibernate: true}}
	res, err = e.CheckResource(ctx, &environ.Resource{ID: testID, Type: domain.ResourceTypeRuntime, State: asleep.State}, opts)
	if want := "deployment " + name + " re-applied: replicas changed out of band (1, want 0)"; err != nil || len(res.Repairs) != 1 || res.Repairs[0] != want {
		t.Errorf("check of a hibernated runtime scaled out of band: %+v, %v; want [%q]", res, err, want)
	}

	// Waking gives the replicas back, nothing else.
	cs.ClearActions()
	woken, err := e.Reconcile(ctx, &environ.Resource{ID: testID, Type: domain.ResourceTypeRuntime, State: asleep.State, Config: running.Config}, opts)
	if err != nil {
		t.Fatalf("wake: %v", err)
	}
	if !reflect.DeepEqual(woken.State, running.State) || !reflect.DeepEqual(woken.Config, running.Config) {
		t.Errorf("woken: state %v config %v, want %v and %v", woken.State, woken.Config, running.State, running.Config)
	}
	d, _ = cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
	if replicas(d.Spec.Replicas) != 1 || !reflect.DeepEqual(d.Spec.Template, before.Spec.Template) {
		t.Errorf("woken deployment: replicas %d, template changed %v", replicas(d.Spec.Replicas), !reflect.DeepEqual(d.Spec.Template, before.Spec.Template))
	}
	if c, err := e.Capacity(ctx); err != nil || c.Used != 3 {
		t.Errorf("capacity once woken: %+v, %v; want its 3 slots used", c, err)
	}
}

// A check that finds the resource paused, or asked to hibernate, before it repairs anything
// repairs nothing and says the row moved on (an error wrapping domain.ErrStale).
func TestCheckResourceRepairsNothingOncePausedOrHibernating(t *testing.T) {
	for _, row := range []domain.Resource{
		{Generation: 1, Status: domain.StatusReady, Paused: true},
		{Generation: 1, Status: domain.StatusReady, Hibernate: true},
	} {
		e, cs := newTestEnviron(t, testSpec)
		ctx := t.Context()
		name := "rt-" + testPID
		opts := &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1}
		reconcile(t, e, runtimeResource(testID), opts.Args)
		if err := cs.CoreV1().Services("ns").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		row.ID = testID
		e.resources.moved = map[string]domain.Resource{testID: row}
		_, err := e.CheckResource(ctx, runtimeResource(testID), opts)
		if !errors.Is(err, domain.ErrStale) {
			t.Errorf("row %+v: CheckResource = %v, want an error wrapping ErrStale", row, err)
		}
		if _, err := cs.CoreV1().Services("ns").Get(ctx, name, metaGet); err == nil {
			t.Errorf("row %+v: the service was re-applied", row)
		}
	}
}

// Every object carries each of the resource's labels under label.berth.dev/; a changed set
// relabels them (removing those no longer there) without rolling the pods, the Secret of a
// ClickHouse resource included.
func TestResourceLabelsOnEveryObject(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	ctx := t.Context()
	opts := &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1, Labels: map[string]string{"team": "data", "tier": "prod"}}
	if _, err := e.Reconcile(ctx, runtimeResource(testID), opts); err != nil {
		t.Fatal(err)
	}
	chOpts := &environ.ResourceOptions{Generation: 1, Labels: opts.Labels}
	if _, err := e.Reconcile(ctx, clickhouseResource(otherID), chOpts); err != nil {
		t.Fatal(err)
	}
	labelsOf := func() map[string]map[string]string {
		t.Helper()
		out := map[string]map[string]string{}
		owned, err := e.listOwned(ctx, cs, e.provisionerSelector())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range owned {
			mine := map[string]string{}
			for k, v := range o.obj.GetLabels() {
				if strings.HasPrefix(k, LabelPrefix) {
					mine[k] = v
				}
			}
			out[o.String()] = mine
		}
		return out
	}
	objects := labelsOf()
	if len(objects) < 9 { // five of the runtime, the secret, service, claim and statefulset of clickhouse
		t.Fatalf("objects %v, want the runtime's and clickhouse's", objects)
	}
	for obj, got := range objects {
		if want := map[string]string{LabelPrefix + "team": "data", LabelPrefix + "tier": "prod"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s labels %v, want %v", obj, got, want)
		}
	}
	before, _ := cs.AppsV1().Deployments("ns").Get(ctx, "rt-"+testPID, metaGet)

	opts.Labels = map[string]string{"team": "web"}
	opts.Generation, chOpts.Generation, chOpts.Labels = 2, 2, opts.Labels
	if _, err := e.Reconcile(ctx, runtimeResource(testID), opts); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Reconcile(ctx, clickhouseResource(otherID), chOpts); err != nil {
		t.Fatal(err)
	}
	for obj, got := range labelsOf() {
		if want := map[string]string{LabelPrefix + "team": "web"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s labels after relabelling %v, want %v", obj, got, want)
		}
	}
	after, _ := cs.AppsV1().Deployments("ns").Get(ctx, "rt-"+testPID, metaGet)
	if !reflect.DeepEqual(after.Spec.Template, before.Spec.Template) {
		t.Errorf("relabelling changed the pod template")
	}
	cs.ClearActions()
	if _, err := e.Reconcile(ctx, runtimeResource(testID), opts); err != nil {
		t.Fatal(err)
	}
	if got := applies(cs); len(got) != 0 {
		t.Errorf("reconciling the same labels again applied %v", got)
	}
}

// A label a row written with SQL holds that Kubernetes refuses is a permanent failure naming
// the field.
func TestResourceLabelsKubernetesRefusesArePermanent(t *testing.T) {
	e, _ := newTestEnviron(t, testSpec)
	_, err := e.Reconcile(t.Context(), runtimeResource(testID), &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Labels: map[string]string{"team": "no spaces"}})
	if !environ.IsPermanent(err) || !strings.Contains(err.Error(), `labels: value "no spaces" of "team" cannot label Kubernetes objects`) {
		t.Errorf("Reconcile with a bad label = %v, want a permanent error naming labels", err)
	}
}

// A resource without a workload runs nothing: hibernating it creates nothing.
func TestHibernateWithoutAWorkloadAppliesNothing(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	res, err := e.Hibernate(t.Context(), &environ.Resource{ID: testID, Type: domain.ResourceTypeRuntime, State: map[string]any{"checksum": "x"}},
		&environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"checksum": "x", "hibernated": true}; !reflect.DeepEqual(res.State, want) {
		t.Errorf("state %v, want %v", res.State, want)
	}
	if got := applies(cs); len(got) != 0 {
		t.Errorf("hibernating a resource without a workload applied %v", got)
	}
}
