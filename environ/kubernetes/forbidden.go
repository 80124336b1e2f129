package kubernetes

import (
	"errors"
	"fmt"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// authorizerDenial matches the reason the API server gives when its authorizer (RBAC, or any
// other) denies a request: `User "U" cannot VERB resource "R" in API group "G" in the
// namespace "N"` (or `at the cluster scope`). Other Forbidden answers (an exceeded quota, a
// namespace being terminated, an admission policy) do not match: no RBAC rule would help.
var authorizerDenial = regexp.MustCompile(`cannot (\S+) resource "([^"]+)" in API group "([^"]*)" (?:in the namespace "([^"]+)"|at the cluster scope)`)

// forbiddenError is an API request denied by the cluster's authorizer, with what it takes to
// allow it: which verb on which resource, where, and so the RBAC rule to add to the agent's
// Role (or ClusterRole, for a cluster-scoped resource). It names the account (a user name)
// but never its credentials.
type forbiddenError struct {
	Verb      string
	Group     string // "" for the core group
	Resource  string // e.g. "deployments"; "pods/log" for a subresource
	Namespace string // "" for a cluster-scoped request
	err       error  // the API server's answer
}

func (e *forbiddenError) Error() string {
	where := "a Role in namespace " + e.Namespace
	if e.Namespace == "" {
		where = "a ClusterRole"
	}
	return fmt.Sprintf("%v: Kubernetes RBAC denies %s on %s; add the rule {apiGroups: [%q], resources: [%q], verbs: [%q]} to %s bound to the agent's service account (deploy/kubernetes/rbac.yaml has every rule Berth needs)",
		e.err, e.Verb, e.qualifiedResource(), e.Group, e.Resource, e.Verb, where)
}

// Unwrap returns the API server's answer, so apierrors.IsForbidden still holds.
func (e *forbiddenError) Unwrap() error { return e.err }

func (e *forbiddenError) qualifiedResource() string {
	if e.Group == "" {
		return e.Resource
	}
	return e.Resource + "." + e.Group
}

// explainForbidden returns err as a *forbiddenError when it is the authorizer's denial of a
// request, and err unchanged otherwise. The verb, resource, group and namespace are the ones
// the authorizer checked, which for a server-side apply of an object that does not exist yet
// is create, not patch.
func explainForbidden(err error) error {
	if err == nil || !apierrors.IsForbidden(err) {
		return err
	}
	var already *forbiddenError
	if errors.As(err, &already) {
		return err
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err
	}
	m := authorizerDenial.FindStringSubmatch(status.Status().Message)
	if m == nil {
		return err
	}
	return &forbiddenError{Verb: m[1], Resource: m[2], Group: m[3], Namespace: m[4], err: err}
}
