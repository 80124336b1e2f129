package kubernetes

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// rolloutStatus is the status fields Deployments and StatefulSets share, for the cases below.
type rolloutStatus struct {
	generation, observed                int64
	want                                int32
	replicas, updated, ready, available int32
}

func deploymentWith(s rolloutStatus) runtime.Object {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "rt-x", Generation: s.generation},
		Spec:       appsv1.DeploymentSpec{Replicas: &s.want},
		Status: appsv1.DeploymentStatus{ObservedGeneration: s.observed, Replicas: s.replicas,
			UpdatedReplicas: s.updated, ReadyReplicas: s.ready, AvailableReplicas: s.available},
	}
}

func statefulSetWith(s rolloutStatus) runtime.Object {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ch-x", Generation: s.generation},
		Spec:       appsv1.StatefulSetSpec{Replicas: &s.want},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: s.observed, Replicas: s.replicas,
			UpdatedReplicas: s.updated, ReadyReplicas: s.ready, AvailableReplicas: s.available},
	}
}

// TestRolloutCompleteJudgesBothWorkloadKindsAlike: a Deployment and a StatefulSet with the
// same rollout status are judged the same, by one test, with the same reason.
func TestRolloutCompleteJudgesBothWorkloadKindsAlike(t *testing.T) {
	cases := []struct {
		name   string
		status rolloutStatus
		why    string // after "<kind> <name>: "; empty when complete
	}{
		{"complete", rolloutStatus{2, 2, 1, 1, 1, 1, 1}, ""},
		{"scaled to zero, last pod gone", rolloutStatus{3, 3, 0, 0, 0, 0, 0}, ""},
		{"spec not yet observed", rolloutStatus{3, 2, 1, 1, 1, 1, 1}, "the controller has not yet seen generation 3"},
		{"new pod not created yet", rolloutStatus{2, 2, 1, 1, 0, 1, 1}, "0 of 1 replicas updated"},
		{"old pod still terminating", rolloutStatus{2, 2, 1, 2, 1, 1, 1}, "1 old replicas still terminating"},
		{"not ready", rolloutStatus{2, 2, 1, 1, 1, 0, 0}, "0 of 1 replicas available"},
		{"ready, not yet available", rolloutStatus{2, 2, 1, 1, 1, 1, 0}, "0 of 1 replicas available"},
		{"scaling down to zero", rolloutStatus{3, 3, 0, 1, 0, 1, 1}, "1 old replicas still terminating"},
	}
	kinds := []struct {
		kind, name string
		object     func(rolloutStatus) runtime.Object
	}{
		{"deployment", "rt-x", deploymentWith},
		{"statefulset", "ch-x", statefulSetWith},
	}
	for _, c := range cases {
		for _, k := range kinds {
			ro, ok := rolloutOf(k.object(c.status))
			if !ok {
				t.Fatalf("%s: no rollout read from a %s", c.name, k.kind)
			}
			ready, why := ro.complete()
			want := ""
			if c.why != "" {
				want = k.kind + " " + k.name + ": " + c.why
			}
			if ready != (c.why == "") || why != want {
				t.Errorf("%s, %s: complete() = %v, %q; want %v, %q", c.name, k.kind, ready, why, c.why == "", want)
			}
		}
	}
}

// TestRolloutOfOtherObjects: an object that runs no rollout is never ready.
func TestRolloutOfOtherObjects(t *testing.T) {
	if _, ok := rolloutOf(&corev1.Service{}); ok {
		t.Error("a Service has a rollout")
	}
	if ready, _ := rolledOut(&corev1.Service{}); ready {
		t.Error("a Service counts as a ready workload")
	}
}

// TestRolloutFailingConditions: a Deployment's stuck rollout conditions are read; a
// StatefulSet's conditions go through the same test.
func TestRolloutFailingConditions(t *testing.T) {
	d := deploymentWith(rolloutStatus{1, 1, 1, 1, 1, 0, 0}).(*appsv1.Deployment)
	d.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "too slow"},
		{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"},
	}
	s := statefulSetWith(rolloutStatus{1, 1, 1, 1, 1, 0, 0}).(*appsv1.StatefulSet)
	s.Status.Conditions = []appsv1.StatefulSetCondition{
		{Type: "Progressing", Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		{Type: "ReplicaFailure", Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota"},
	}
	for obj, want := range map[runtime.Object][]string{
		d: {"Progressing ProgressDeadlineExceeded", "ReplicaFailure FailedCreate"},
		s: {"ReplicaFailure FailedCreate"},
	} {
		ro, _ := rolloutOf(obj)
		var got []string
		for _, c := range ro.conditions {
			if c.failing() {
				got = append(got, c.kind+" "+c.reason)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: failing conditions %q, want %q", ro.kind, got, want)
		}
	}
}
