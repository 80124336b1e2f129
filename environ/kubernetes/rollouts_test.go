package kubernetes

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// syncedRollouts starts e's cache of Deployments and waits until it has listed them.
func syncedRollouts(t *testing.T, e *testEnv, cs *fake.Clientset) *rollouts {
	t.Helper()
	ro, err := e.rolloutsOf(cs, deployments)
	if err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(t.Context().Done(), ro.synced) {
		t.Fatal("the Deployments cache never synced")
	}
	return ro
}

// deploymentRequests counts the list and watch requests made for Deployments so far.
func deploymentRequests(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if (a.GetVerb() == "list" || a.GetVerb() == "watch") && a.GetResource().Resource == "deployments" {
			n++
		}
	}
	return n
}

// awaitInBackground runs AwaitReady of resource testID once ro has a wait for it in
// progress, and returns where its result arrives.
func awaitInBackground(t *testing.T, e *testEnv, ro *rollouts) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.AwaitReady(t.Context(), runtimeResource(testID)) }()
	waitForCachedWait(t, ro, done)
	return done
}

// waitForCachedWait returns once ro has a wait for resource testID in progress, and fails
// the test if the call waiting (whose result done carries) returns first.
func waitForCachedWait(t *testing.T, ro *rollouts, done chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ro.mu.Lock()
		waiting := len(ro.waiters[testID]) > 0
		ro.mu.Unlock()
		if waiting {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("returned %v without waiting on the cache", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("never waited on the cache")
		}
		time.Sleep(time.Millisecond)
	}
}

// requireWaiting fails the test when AwaitReady has returned.
func requireWaiting(t *testing.T, done <-chan error, when string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("AwaitReady returned %v %s", err, when)
	case <-time.After(50 * time.Millisecond):
	}
}

// Once the provisioner's Deployments are cached, awaiting a rollout that Reconcile applied
// lists and watches nothing of its own: the cache tells it when the rollout completes.
func TestAwaitReadyOnTheCacheListsAndWatchesNothing(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	ro := syncedRollouts(t, e, cs)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	before := deploymentRequests(cs)

	done := awaitInBackground(t, e, ro)
	requireWaiting(t, done, "before the rollout")
	setDeploymentAvailable(t, cs, "rt-"+testPID)
	if err := <-done; err != nil {
		t.Fatalf("AwaitReady: %v", err)
	}
	if after := deploymentRequests(cs); after != before {
		t.Errorf("AwaitReady made %d list or watch requests for Deployments; want none", after-before)
	}
}

// A cached Deployment older than the generation the last Reconcile applied is not taken
// for its rollout, even when that older generation rolled out: the cache may not have seen
// the apply yet.
func TestAwaitReadyOnTheCacheWaitsForTheAppliedGeneration(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	ro := syncedRollouts(t, e, cs)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	name := "rt-" + testPID
	setGeneration := func(generation, observed int64, available int32) {
		t.Helper()
		d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
		if err != nil {
			t.Fatal(err)
		}
		d.Generation = generation
		if d, err = cs.AppsV1().Deployments("ns").Update(t.Context(), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: 1, UpdatedReplicas: available, AvailableReplicas: available}
		if _, err := cs.AppsV1().Deployments("ns").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Generation 1 rolled out; the apply just made wrote generation 2.
	setGeneration(1, 1, 1)
	e.floorsMu.Lock()
	e.floors[testID] = 2
	e.floorsMu.Unlock()

	done := awaitInBackground(t, e, ro)
	requireWaiting(t, done, "on the rolled-out generation before the one applied")
	setGeneration(2, 1, 1)
	requireWaiting(t, done, "before the controller saw the generation applied")
	setGeneration(2, 2, 1)
	if err := <-done; err != nil {
		t.Fatalf("AwaitReady: %v", err)
	}
}

// A rollout no Reconcile of this environ said the generation of (as after a restart) is
// awaited by listing and watching its Deployment alone.
func TestAwaitReadyWithoutAGenerationWatchesAlone(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	watching := make(chan string, 10)
	cs.PrependWatchReactor("deployments", func(a k8stesting.Action) (bool, watch.Interface, error) {
		watching <- a.(k8stesting.WatchAction).GetWatchRestrictions().Labels.String()
		return false, nil, nil
	})
	e.takeFloor(testID) // as after a restart
	done := make(chan error, 1)
	go func() { done <- e.AwaitReady(t.Context(), runtimeResource(testID)) }()
	for sel := range watching {
		if sel == e.selector(testID) {
			break
		}
	}
	setDeploymentAvailable(t, cs, "rt-"+testPID)
	if err := <-done; err != nil {
		t.Fatalf("AwaitReady: %v", err)
	}
}

// Close stops the cache of workloads and waits for it.
func TestCloseStopsTheWorkloadCache(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	ro := syncedRollouts(t, e, cs)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !ro.informer.IsStopped() {
		t.Error("the Deployments cache still runs after Close")
	}
	if _, err := e.rolloutsOf(cs, statefulSets); err == nil {
		t.Error("a closed environ started a cache")
	}
}

// Once the Deployments are cached, Hibernate waits for the scale-down it applied on the
// cache: it lists the running workloads once, and watches nothing of its own.
func TestHibernateOnTheCacheWatchesNothing(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	ro := syncedRollouts(t, e, cs)
	opts := &environ.ResourceOptions{Args: map[string]any{"slots": 1}, Generation: 1}
	running := reconcile(t, e, runtimeResource(testID), opts.Args)
	// Two pods still run, none of the current template: no rollout, to one replica or to
	// none, is complete until the pods are gone. (The fake API server does not move a
	// workload's generation on, so a status must not look complete for the spec either
	// side of the apply.)
	name := "rt-" + testPID
	d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2}
	if _, err := cs.AppsV1().Deployments("ns").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := deploymentRequests(cs)

	done := make(chan error, 1)
	go func() {
		_, err := e.Hibernate(t.Context(), &environ.Resource{ID: testID, Type: domain.ResourceTypeRuntime, State: running.State, Config: running.Config}, opts)
		done <- err
	}()
	waitForCachedWait(t, ro, done)
	requireWaiting(t, done, "before the pods were gone")
	setDeploymentScaledDown(t, cs, name)
	if err := <-done; err != nil {
		t.Fatalf("Hibernate: %v", err)
	}
	if after := deploymentRequests(cs); after != before+1 {
		t.Errorf("Hibernate made %d list or watch requests for Deployments; want its one list of the running workloads", after-before)
	}
}
