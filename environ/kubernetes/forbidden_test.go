package kubernetes

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// denied is the Forbidden answer the API server gives when its authorizer denies user the
// verb on resource (of group) in namespace ns, or at the cluster scope when ns is empty.
func denied(verb, group, resource, name, ns string) error {
	where := ` in the namespace "` + ns + `"`
	if ns == "" {
		where = " at the cluster scope"
	}
	reason := `User "system:serviceaccount:berth:berth" cannot ` + verb + ` resource "` + resource + `" in API group "` + group + `"` + where
	return apierrors.NewForbidden(schema.GroupResource{Group: group, Resource: resource}, name, errors.New(reason))
}

func TestExplainForbidden(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string // a part of the message; "" for err unchanged
	}{
		{"namespaced", denied("delete", "apps", "deployments", "rt-x", "runtimes"),
			`Kubernetes RBAC denies delete on deployments.apps; add the rule {apiGroups: ["apps"], resources: ["deployments"], verbs: ["delete"]} to a Role in namespace runtimes bound to the agent's service account`},
		{"core group", denied("create", "", "configmaps", "rt-x", "runtimes"),
			`denies create on configmaps; add the rule {apiGroups: [""], resources: ["configmaps"], verbs: ["create"]} to a Role in namespace runtimes`},
		{"cluster scope", denied("list", "", "nodes", "", ""),
			`add the rule {apiGroups: [""], resources: ["nodes"], verbs: ["list"]} to a ClusterRole bound to the agent's service account`},
		{"quota", apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "rt-x", errors.New("exceeded quota: storage, requested: requests.storage=40Gi")), ""},
		{"terminating namespace", apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "rt-x", errors.New("unable to create new content in namespace runtimes because it is being terminated")), ""},
		{"not forbidden", apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "rt-x"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := explainForbidden(tc.err)
			if tc.want == "" {
				if got != tc.err {
					t.Errorf("got %v, want the error unchanged", got)
				}
				return
			}
			if !strings.HasPrefix(got.Error(), tc.err.Error()+": ") || !strings.Contains(got.Error(), tc.want) {
				t.Errorf("got %q\nwant the API server's answer followed by %q", got, tc.want)
			}
			if !apierrors.IsForbidden(got) {
				t.Error("the explained error is no longer Forbidden")
			}
			if again := explainForbidden(got); again != got {
				t.Errorf("explained twice: %v", again)
			}
		})
	}
}

// TestDeprovisionForbiddenNamesTheRule: a deletion the cluster's RBAC denies fails the
// deprovision with the resource, the verb and the rule to add.
func TestDeprovisionForbiddenNamesTheRule(t *testing.T) {
	e, cs := newTestEnviron(t, testSpec)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	cs.PrependReactor("delete", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, denied("delete", "apps", "deployments", a.(k8stesting.DeleteAction).GetName(), "ns")
	})
	err := e.Deprovision(t.Context(), runtimeResource(testID))
	want := `delete deployment rt-` + testPID + `: deployments.apps "rt-` + testPID + `" is forbidden: User "system:serviceaccount:berth:berth" cannot delete resource "deployments" in API group "apps" in the namespace "ns": ` +
		`Kubernetes RBAC denies delete on deployments.apps; add the rule {apiGroups: ["apps"], resources: ["deployments"], verbs: ["delete"]} to a Role in namespace ns bound to the agent's service account`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Deprovision: %v\nwant it to contain %q", err, want)
	}
}
