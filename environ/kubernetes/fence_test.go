package kubernetes

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// leased is resource id of type runtime as an attempt under lease (holder, token) sees it.
func leased(id, holder string, token int64) *environ.Resource {
	return &environ.Resource{ID: id, Type: domain.ResourceTypeRuntime, Lease: &domain.Lease{Holder: holder, Token: token}}
}

// wantStale fails unless err is a StaleWriteError naming holder that the provisioner takes
// for a lost lease, and the environ logged it.
func wantStale(t *testing.T, what string, err error, holder string, log *strings.Builder) {
	t.Helper()
	var stale *StaleWriteError
	var held *domain.LeaseHeldError
	if !errors.As(err, &stale) || !errors.As(err, &held) || held.Holder != holder {
		t.Fatalf("%s = %v, want a StaleWriteError wrapping a lease held by %s", what, err, holder)
	}
	if !strings.Contains(log.String(), "refused a stale write to the cluster") {
		t.Errorf("%s: the refusal was not logged: %s", what, log.String())
	}
}

// TestApplyRecordsTheAttemptsFence: every object applied carries the attempt's generation,
// lease token and holder.
func TestApplyRecordsTheAttemptsFence(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	ctx := t.Context()
	if _, err := e.Reconcile(ctx, leased(testID, "agent-a", 7), &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 3}); err != nil {
		t.Fatal(err)
	}
	objs, err := e.listOwned(ctx, cs, e.selector(testID))
	if err != nil || len(objs) == 0 {
		t.Fatalf("objects: %v, %v", objs, err)
	}
	for _, o := range objs {
		if got := fenceOf(o.obj); got != (fence{generation: 3, token: 7, holder: "agent-a"}) {
			t.Errorf("%s records %+v, want generation 3, token 7 of agent-a", o, got)
		}
	}
}

// TestStaleAttemptsWriteNothing: once an attempt under a newer lease (or of a newer
// generation) applied the objects, an older attempt's Reconcile, Hibernate and Deprovision
// are refused before they write anything, with an error the provisioner takes for a lost
// lease, and logged.
func TestStaleAttemptsWriteNothing(t *testing.T) {
	var log strings.Builder
	cs := fake.NewClientset()
	e := newTestEnvironOn(t, testSpec, cs, make([]byte, 64), openSlots(t), &log)
	ctx := t.Context()
	newer := &environ.ResourceOptions{Args: map[string]any{"slots": 2}, Generation: 2}
	if _, err := e.Reconcile(ctx, leased(testID, "agent-b", 5), newer); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	older := &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1}
	_, err := e.Reconcile(ctx, leased(testID, "agent-a", 4), older)
	wantStale(t, "Reconcile under an older lease", err, "agent-b", &log)
	_, err = e.Reconcile(ctx, leased(testID, "agent-a", 6), older)
	wantStale(t, "Reconcile of an older generation under a newer lease", err, "agent-b", &log)
	_, err = e.Hibernate(ctx, leased(testID, "agent-a", 4), newer)
	wantStale(t, "Hibernate under an older lease", err, "agent-b", &log)
	err = e.Deprovision(ctx, leased(testID, "agent-a", 4))
	wantStale(t, "Deprovision under an older lease", err, "agent-b", &log)
	for _, a := range cs.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			t.Errorf("a stale attempt wrote: %s %s", v, a.GetResource().Resource)
		}
	}
	d, err := cs.AppsV1().Deployments("ns").Get(ctx, "rt-"+testPID, metaGet)
	if err != nil || replicas(d.Spec.Replicas) != 1 || fenceOf(d).generation != 2 {
		t.Fatalf("deployment after the stale attempts: %v, %+v", err, d)
	}

	// The current holder goes on, and a later claim of the same generation too.
	if _, err := e.Reconcile(ctx, leased(testID, "agent-b", 5), newer); err != nil {
		t.Errorf("Reconcile of the current holder: %v", err)
	}
	if err := e.Deprovision(ctx, leased(testID, "agent-c", 9)); err != nil {
		t.Errorf("Deprovision under a newer lease: %v", err)
	}
}

// provisionedByAgentA is an environ that logs to the builder it returns, and runtime testID
// of 1 slot reconciled on it at generation 1 under agent-a's lease token 1.
func provisionedByAgentA(t *testing.T) (*testEnv, *fake.Clientset, *strings.Builder) {
	t.Helper()
	log := &strings.Builder{}
	cs := fake.NewClientset()
	e := newTestEnvironOn(t, testSpec, cs, make([]byte, 64), openSlots(t), log)
	if _, err := e.Reconcile(t.Context(), leased(testID, "agent-a", 1), &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	return e, cs, log
}

// TestApplyChecksTheFenceOnWhatItReplaces: a write that lands between the read of an object
// and its apply is not overwritten: the apply is conditional on the version read, so the
// API server refuses it (a conflict), and the object read again carries the newer lease, so
// the attempt is refused.
func TestApplyChecksTheFenceOnWhatItReplaces(t *testing.T) {
	e, cs, log := provisionedByAgentA(t)
	ctx := t.Context()
	name := "rt-" + testPID
	var once sync.Once
	var conflict error
	cs.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		// Another agent's apply lands first, under a newer lease.
		once.Do(func() {
			gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
			obj, err := cs.Tracker().Get(gvr, "ns", name)
			if err != nil {
				t.Error(err)
				return
			}
			d := obj.(*appsv1.Deployment).DeepCopy()
			d.Annotations[AnnotationLeaseToken] = "2"
			d.Annotations[AnnotationLeaseHolder] = "agent-b"
			d.Annotations[AnnotationGeneration] = "2"
			d.ResourceVersion = "overtaken"
			if err := cs.Tracker().Update(gvr, d, "ns"); err != nil {
				t.Error(err)
			}
			conflict = apierrors.NewConflict(gvr.GroupResource(), name, errors.New("the object has been modified"))
		})
		// The API server refuses an apply on a version that is not the object's any more.
		err := conflict
		conflict = nil
		return err != nil, nil, err
	})
	_, err := e.Reconcile(ctx, leased(testID, "agent-a", 1), &environ.ResourceOptions{Args: map[string]any{"slots": 2}, Generation: 1})
	wantStale(t, "Reconcile overtaken between its read and its apply", err, "agent-b", log)
	d, err := cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if fenceOf(d).token != 2 || d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" {
		t.Errorf("deployment overwritten by the stale apply: %+v, requests %v", d.Annotations, d.Spec.Template.Spec.Containers[0].Resources.Requests)
	}
}

// TestCheckCarriesTheFenceOver: a health check, which holds no lease, repairs with the
// lease the objects record, so the fence stays as the last attempt left it.
func TestCheckCarriesTheFenceOver(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	ctx := t.Context()
	name := "rt-" + testPID
	opts := &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1}
	if _, err := e.Reconcile(ctx, leased(testID, "agent-a", 3), opts); err != nil {
		t.Fatal(err)
	}
	if err := cs.AppsV1().Deployments("ns").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.resources.moved = map[string]domain.Resource{testID: {ID: testID, Generation: 1, Status: domain.StatusReady}}
	if _, err := e.CheckResource(ctx, runtimeResource(testID), opts); err != nil {
		t.Fatal(err)
	}
	d, err := cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if got := fenceOf(d); got != (fence{generation: 1, token: 3, holder: "agent-a"}) {
		t.Errorf("repaired deployment records %+v, want the fence of agent-a's attempt", got)
	}
}

// TestCheckScalesAWokenHibernatedWorkloadBack: a hibernated runtime's Deployment scaled up
// out of band is scaled back to zero by the environ's check while its row is hibernated,
// and the log says who woke it; one whose row was asked to wake is left alone.
func TestCheckScalesAWokenHibernatedWorkloadBack(t *testing.T) {
	e, cs, log := provisionedByAgentA(t)
	ctx := t.Context()
	name := "rt-" + testPID
	opts := &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1}
	if _, _, err := e.converge(ctx, leased(testID, "agent-a", 2), runtimeType, opts, false, true); err != nil {
		t.Fatal(err)
	}
	wake := func() {
		t.Helper()
		d, err := cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = ptr(int32(2))
		if _, err := cs.AppsV1().Deployments("ns").Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
			t.Fatal(err)
		}
	}
	scaled := func() int32 {
		t.Helper()
		d, err := cs.AppsV1().Deployments("ns").Get(ctx, name, metaGet)
		if err != nil {
			t.Fatal(err)
		}
		return replicas(d.Spec.Replicas)
	}

	wake()
	e.resources.moved = map[string]domain.Resource{testID: {ID: testID, Generation: 1, Status: domain.StatusHibernated, Hibernate: true}}
	if err := e.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if n := scaled(); n != 0 {
		t.Errorf("hibernated deployment at %d replicas after a check, want 0", n)
	}
	if !strings.Contains(log.String(), "hibernated resource found running; scaled back to zero") || !strings.Contains(log.String(), "woken-by=kubectl") {
		t.Errorf("log does not say who woke it:\n%s", log.String())
	}

	wake()
	e.resources.moved = map[string]domain.Resource{testID: {ID: testID, Generation: 1, Status: domain.StatusHibernated}}
	if err := e.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if n := scaled(); n != 2 {
		t.Errorf("deployment of a resource asked to wake scaled to %d, want it left at 2", n)
	}
}

func ptr[T any](v T) *T { return &v }

// TestSlotQuotaHoldsAcrossAgents: two environs on one database (two agents, each with its
// own client), quota 4, asked for 3 + 3 slots at once: one applies, the other waits for
// capacity with the quota's numbers. Hibernating gives the slots back, waking takes them
// again (or waits), and deprovisioning gives them back.
func TestSlotQuotaHoldsAcrossAgents(t *testing.T) {
	const spec = `{"host": "http://node-*.localhost", "namespace": "ns", "image": "rilldata/rill", "timeout_seconds": 30, "slot_quota": 4}`
	slots := openSlots(t)
	ctx := t.Context()
	agents := []*testEnv{
		newTestEnvironOn(t, spec, fake.NewClientset(), make([]byte, 64), slots, io.Discard),
		newTestEnvironOn(t, spec, fake.NewClientset(), make([]byte, 64), slots, io.Discard),
	}
	ids := []string{testID, otherID}
	opts := &environ.ResourceOptions{Args: map[string]any{"slots": 3}, Generation: 1}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = agents[i].Reconcile(ctx, runtimeResource(ids[i]), opts)
		}()
	}
	wg.Wait()
	winner, loser := 0, 1
	if errs[0] != nil {
		winner, loser = 1, 0
	}
	if errs[winner] != nil || !errors.Is(errs[loser], domain.ErrNoCapacity) || !strings.Contains(errs[loser].Error(), "3 of 4 slots in use, 3 more wanted") {
		t.Fatalf("3 + 3 slots of a quota of 4 at once: %v; want one applied and one waiting for capacity", errs)
	}
	if c, err := agents[loser].Capacity(ctx); err != nil || c.Used != 3 || c.Total != 4 {
		t.Errorf("capacity seen by the other agent: %+v, %v; want 3 of 4 slots used", c, err)
	}

	// Never available on the fake cluster, so no pod to wait for.
	asleep, err := agents[winner].Hibernate(ctx, runtimeResource(ids[winner]), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agents[loser].Reconcile(ctx, runtimeResource(ids[loser]), opts); err != nil {
		t.Fatalf("Reconcile once the other runtime hibernated: %v", err)
	}
	woken := &environ.Resource{ID: ids[winner], Type: domain.ResourceTypeRuntime, State: asleep.State}
	if _, err := agents[winner].Reconcile(ctx, woken, opts); !errors.Is(err, domain.ErrNoCapacity) {
		t.Fatalf("wake with the quota taken = %v, want ErrNoCapacity", err)
	}
	if err := agents[loser].Deprovision(ctx, runtimeResource(ids[loser])); err != nil {
		t.Fatal(err)
	}
	if _, err := agents[winner].Reconcile(ctx, woken, opts); err != nil {
		t.Fatalf("wake once the other runtime was deprovisioned: %v", err)
	}
}
