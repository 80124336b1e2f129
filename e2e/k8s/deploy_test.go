//go:build k8s

package k8s_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/berth-dev/berth/environ/kubernetes"
	"github.com/berth-dev/berth/internal/e2etest"
)

// What deploy/kubernetes sets up: the agent's namespace and service account, and the
// namespace its Role covers, where the provisioner set puts the runtimes.
const (
	agentNamespace    = "berth"
	agentAccount      = "berth"
	runtimesNamespace = "berth-runtimes"
)

// deployDir is the kustomize base, relative to this package.
const deployDir = "../../deploy/kubernetes"

// TestDeployManifests applies deploy/kubernetes to the cluster server-side and runs the
// real agent with the credentials of its service account only (a token of the TokenRequest
// API and the cluster's CA, nothing of the admin's): runtimes and a ClickHouse are created,
// become ready, are resized, hibernated and woken, and deleted. The account's permissions
// are the ones deploy/kubernetes/README.md lists, and with one verb taken from its Role
// the agent reports which verb on which resource is denied and the rule to add. Both
// namespaces enforce Pod Security "restricted" (the runtimes' and ClickHouse's pods are
// admitted, locked down and without a service-account token; a privileged pod is refused),
// and a NetworkPolicy admits only the metrics scraper to the agents' port.
//
// The base's own Deployment (two agents) is applied, not run: its image is a placeholder
// and its database Secret is not in the base. On the fake nodes its pods are "running"
// without any container; nothing here depends on them.
func TestDeployManifests(t *testing.T) {
	cs := clientset(t)
	ctx := context.Background()
	base := buildManifests(t, deployDir)

	// The base holds no Secret: the database URL is created by the operator.
	for _, o := range base {
		if o.GetKind() == "Secret" {
			t.Errorf("the base holds Secret %s/%s: a database URL belongs in no checked-in file", o.GetNamespace(), o.GetName())
		}
	}
	checkAgentDeployment(t, base)
	checkServiceMonitorComponent(t)
	checkProvisionerSet(t, base)

	// Applied server-side, with no warning, and every object is there.
	waitNamespacesGone(t, cs, agentNamespace, runtimesNamespace)
	t.Cleanup(func() {
		if _, stderr, err := kubectl(t, "delete", "-k", deployDir, "--ignore-not-found", "--wait=false"); err != nil {
			t.Logf("delete the base: %v: %s", err, stderr)
		}
	})
	applyBase(t)
	dyn, mapper := dynamicClient(t)
	for _, o := range base {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
		if _, err := dyn.Resource(m.Resource).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{}); err != nil {
			t.Errorf("%s %s/%s after the apply: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}

	// The service account's own credentials, and what the cluster says they allow.
	kubeconfig := serviceAccountKubeconfig(t, cs)
	saClient := clientFor(t, kubeconfig)
	if _, err := saClient.CoreV1().Secrets(agentNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the account lists the agent's own Secrets (the database URL): %v, want forbidden", err)
	}
	granted := grantedPermissions(t, cs, saClient)
	documented := documentedPermissions(t)
	if !slices.Equal(granted, documented) {
		t.Errorf("the service account's permissions in %s differ from deploy/kubernetes/README.md's\ngranted:    %v\ndocumented: %v\nonly granted: %v\nonly documented: %v",
			runtimesNamespace, granted, documented, difference(granted, documented), difference(documented, granted))
	}
	if out, _, err := kubectl(t, "auth", "can-i", "--list", "--as=system:serviceaccount:"+agentNamespace+":"+agentAccount, "-n", runtimesNamespace); err == nil {
		t.Logf("kubectl auth can-i --list for the account:\n%s", out)
	}

	// The agent on the base's provisioner set, with the account's kubeconfig.
	spec := provisionerSpecOf(t, base)
	spec["kubeconfig_path"] = kubeconfig
	spec["timeout_seconds"] = 90
	set, err := json.Marshal(map[string]any{provisioner: map[string]any{"type": "kubernetes", "spec": spec}})
	if err != nil {
		t.Fatal(err)
	}
	e := e2etest.New(t, set)
	a := startAgent(e)
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, cs, runtimesNamespace)
		}
	})

	ids := make([]string, 2)
	for i := range ids {
		ids[i] = e.Create("--type", "runtime", "--name", fmt.Sprintf("deployed-%d", i), "--owner", "team-a", "--arg", "slots=1")
	}
	chID := e.Create("--type", "clickhouse", "--name", "deployed-events", "--owner", "team-a")
	for _, id := range append(append([]string{}, ids...), chID) {
		e.WaitReady(id, readyWithin)
	}
	for _, id := range ids {
		if d := deploymentOf(t, cs, runtimesNamespace, id); !rolledOut(d) {
			t.Errorf("runtime %s ready but not rolled out: %+v", id, d.Status)
		}
	}
	checkRuntimesLockedDown(t, cs, ids[0], chID)
	e.Berth("resource", "update", ids[0], "--arg", "slots=2", "--wait", "--timeout", "3m")
	if d := deploymentOf(t, cs, runtimesNamespace, ids[0]); d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String() != "2" || !rolledOut(d) {
		t.Errorf("after resize: %v, %+v", d.Spec.Template.Spec.Containers[0].Resources, d.Status)
	}
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET hibernate = true WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	e.WaitResource(ids[1], "hibernated", readyWithin, func(r e2etest.Resource) bool { return r.Status == "hibernated" })
	if n := podsOf(t, cs, runtimesNamespace, ids[1]); n != 0 {
		t.Errorf("%d pods of the hibernated runtime left", n)
	}
	if _, err := e.SQL.ExecContext(ctx, `UPDATE resources SET hibernate = false WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	e.WaitReady(ids[1], readyWithin)
	// Health checks, environ checks and capacity samples (which list nodes) ran meanwhile;
	// none was denied.
	e.Eventually("a capacity sample", readyWithin, func() (bool, string) {
		n := e.QueryInt(`SELECT count(*) FROM capacity_samples`)
		return n > 0, fmt.Sprintf("%d samples", n)
	})
	if logs := a.Logs(); strings.Contains(logs, "forbidden") {
		t.Errorf("the agent was denied a request with the base's RBAC:\n%s", grepLines(logs, "forbidden"))
	}

	// Without delete on Deployments, a runtime's deletion stops at its Deployment, and the
	// status says which verb on which resource is missing and the rule to add.
	withoutVerb(t, cs, "apps", "deployments", "delete")
	e.Berth("resource", "delete", ids[0])
	want := `cannot delete resource "deployments" in API group "apps" in the namespace "` + runtimesNamespace + `": ` +
		`Kubernetes RBAC denies delete on deployments.apps; add the rule {apiGroups: ["apps"], resources: ["deployments"], verbs: ["delete"]} ` +
		`to a Role in namespace ` + runtimesNamespace + ` bound to the agent's service account`
	denied := waitEvent(t, e, ids[0], func(_, message string) bool { return strings.Contains(message, want) })
	t.Logf("the denied deletion is reported as: %s", denied)
	if r := e.Get(ids[0]); r.Status != "deleting" {
		t.Errorf("runtime whose deployment may not be deleted: %s", r)
	}
	token := tokenOf(t, kubeconfig)
	for what, text := range map[string]string{"event": denied, "status": e.Get(ids[0]).StatusMessage, "log": a.Logs()} {
		if strings.Contains(text, token) {
			t.Errorf("the service account's token is in the %s", what)
		}
	}

	// With the Role put back, the deletion goes through, and so does the rest.
	applyBase(t, "--force-conflicts")
	for _, id := range ids[1:] {
		e.Berth("resource", "delete", id)
	}
	e.Berth("resource", "delete", chID)
	e.WaitCount("every resource deprovisioned", readyWithin, 0, "SELECT count(*) FROM resources")
	waitGone(t, cs, runtimesNamespace, repairWithin)
	a.Stop(t)
}

// kubectl runs kubectl with the cluster's admin kubeconfig.
func kubectl(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is not on PATH (%v): install it (Debian: apt-get install kubernetes-client) to check the manifests", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfigPath(t)}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	return stdout.String(), stderr.String(), err
}

// applyBase applies the base server-side (as `kubectl apply --server-side -k`); anything on
// stderr (a warning, say) fails the test.
func applyBase(t testing.TB, extra ...string) {
	t.Helper()
	out, stderr, err := kubectl(t, append([]string{"apply", "--server-side", "-k", deployDir}, extra...)...)
	if err != nil {
		t.Fatalf("kubectl apply --server-side -k %s: %v\n%s%s", deployDir, err, out, stderr)
	}
	if strings.TrimSpace(stderr) != "" {
		t.Errorf("kubectl apply --server-side -k %s warned:\n%s", deployDir, stderr)
	}
}

// buildManifests is what `kubectl kustomize dir` renders.
func buildManifests(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, stderr, err := kubectl(t, "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode kubectl kustomize %s: %v", dir, err)
		}
		if len(o.Object) > 0 {
			objs = append(objs, &o)
		}
	}
	if len(objs) == 0 {
		t.Fatalf("kubectl kustomize %s rendered nothing", dir)
	}
	return objs
}

// objectOf is the object of kind and name in objs.
func objectOf(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("the base has no %s %s", kind, name)
	return nil
}

// checkAgentDeployment checks what the agent's Deployment promises: two replicas, the
// probes, the database URL from a Secret, a locked-down container.
func checkAgentDeployment(t testing.TB, base []*unstructured.Unstructured) {
	t.Helper()
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objectOf(t, base, "Deployment", "berth").Object, &d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != agentAccount || pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("pod: service account %q, security context %+v", pod.ServiceAccountName, pod.SecurityContext)
	}
	c := pod.Containers[0]
	if c.Image != "berth:latest" {
		t.Errorf("image %q, want the placeholder berth:latest", c.Image)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v, want GET /healthz", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz", p)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v, want CPU and memory requests and a memory limit", c.Resources)
	}
	checkLockedDown(t, "agent", pod, c, true)
	var fromSecret bool
	for _, env := range c.Env {
		if env.Name == "BERTH_DATABASE_URL" {
			fromSecret = env.ValueFrom != nil && env.ValueFrom.SecretKeyRef != nil && env.Value == ""
		}
	}
	if !fromSecret {
		t.Errorf("BERTH_DATABASE_URL is not read from a Secret: %+v", c.Env)
	}
}

// checkLockedDown checks that container c of pod runs as Pod Security "restricted" asks (a
// numeric non-root user, no privilege escalation, every capability dropped, seccomp
// RuntimeDefault), each set on the container or the pod, and with a read-only root file
// system when readOnlyRoot.
func checkLockedDown(t testing.TB, what string, pod corev1.PodSpec, c corev1.Container, readOnlyRoot bool) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("%s: the container has no security context", what)
		return
	}
	ps := pod.SecurityContext
	if ps == nil {
		ps = &corev1.PodSecurityContext{}
	}
	nonRoot, user, seccomp := sc.RunAsNonRoot, sc.RunAsUser, sc.SeccompProfile
	if nonRoot == nil {
		nonRoot = ps.RunAsNonRoot
	}
	if user == nil {
		user = ps.RunAsUser
	}
	if seccomp == nil {
		seccomp = ps.SeccompProfile
	}
	switch {
	case nonRoot == nil || !*nonRoot, user == nil || *user == 0:
		t.Errorf("%s: container runs as %v (non-root %v), want a numeric non-root user", what, user, nonRoot)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: the container may escalate privileges", what)
	case readOnlyRoot && (sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem):
		t.Errorf("%s: the container's root file system is writable", what)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s: capabilities %+v, want all dropped", what, sc.Capabilities)
	case seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: seccomp profile %+v, want RuntimeDefault", what, seccomp)
	}
}

// checkRuntimesLockedDown checks what the base and the built-in templates promise of the
// runtimes' pods, on the cluster: both namespaces enforce Pod Security "restricted" (a
// privileged pod is refused), the pods of runtime and of clickhouse are locked down and
// mount no service-account token, and only pods labelled as the metrics scraper, in a
// namespace labelled so, reach the agents' port 9090.
func checkRuntimesLockedDown(t testing.TB, cs k8s.Interface, runtime, clickhouse string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{agentNamespace, runtimesNamespace} {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
			t.Errorf("namespace %s enforces Pod Security %q, want restricted", name, got)
		}
	}
	privileged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: runtimesNamespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)}}}},
	}
	if _, err := cs.CoreV1().Pods(runtimesNamespace).Create(ctx, privileged, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
		t.Errorf("a privileged pod in %s: %v, want refused by Pod Security", runtimesNamespace, err)
	}
	for what, id := range map[string]string{"runtime": runtime, "clickhouse": clickhouse} {
		pods, err := cs.CoreV1().Pods(runtimesNamespace).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelResourceID + "=" + id})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("pods of %s %s: %v, %d", what, id, err, len(pods.Items))
		}
		pod := pods.Items[0].Spec
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("%s pod mounts a service-account token (automountServiceAccountToken %v)", what, pod.AutomountServiceAccountToken)
		}
		for _, v := range pod.Volumes {
			if v.Projected != nil {
				t.Errorf("%s pod has projected volume %s (a service-account token?)", what, v.Name)
			}
		}
		checkLockedDown(t, what, pod, pod.Containers[0], what == "runtime")
	}

	policies, err := cs.NetworkingV1().NetworkPolicies(agentNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(policies.Items) != 1 {
		t.Fatalf("network policies in %s: %v, %d; want one", agentNamespace, err, len(policies.Items))
	}
	p := policies.Items[0].Spec
	scraper := map[string]string{"berth.dev/metrics-scraper": "true"}
	agent := map[string]string{"app.kubernetes.io/name": "berth", "app.kubernetes.io/component": "agent"}
	switch {
	case !maps.Equal(p.PodSelector.MatchLabels, agent) || !slices.Equal(p.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}):
		t.Errorf("network policy selects %v for %v, want the agents' pods for ingress", p.PodSelector.MatchLabels, p.PolicyTypes)
	case len(p.Ingress) != 1 || len(p.Ingress[0].From) != 1 || len(p.Ingress[0].Ports) != 1:
		t.Errorf("network policy admits %+v, want one peer on one port", p.Ingress)
	default:
		from, port := p.Ingress[0].From[0], p.Ingress[0].Ports[0]
		if from.NamespaceSelector == nil || from.PodSelector == nil || !maps.Equal(from.NamespaceSelector.MatchLabels, scraper) || !maps.Equal(from.PodSelector.MatchLabels, scraper) {
			t.Errorf("network policy admits %+v, want pods and namespaces labelled %v", from, scraper)
		}
		if port.Port == nil || port.Port.IntValue() != 9090 {
			t.Errorf("network policy admits port %v, want 9090", port.Port)
		}
	}
	readme, err := os.ReadFile(filepath.Join(deployDir, "README.md"))
	if err != nil || !strings.Contains(string(readme), "berth.dev/metrics-scraper") {
		t.Errorf("deploy/kubernetes/README.md does not say which label the scraper needs (%v)", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// checkServiceMonitorComponent builds an overlay of the base with the ServiceMonitor
// component (not applied: the local cluster has no Prometheus operator).
func checkServiceMonitorComponent(t testing.TB) {
	t.Helper()
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, abs)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf("resources: [%s]\ncomponents: [%s]\n", base, filepath.Join(base, "components", "servicemonitor"))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	sm := objectOf(t, buildManifests(t, overlay), "ServiceMonitor", "berth")
	port, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || len(port) != 1 || port[0].(map[string]any)["port"] != "http-metrics" {
		t.Errorf("servicemonitor: %v", sm.Object)
	}
}

// provisionerSpecOf is the spec of the one provisioner of the base's ConfigMap.
func provisionerSpecOf(t testing.TB, base []*unstructured.Unstructured) map[string]any {
	t.Helper()
	raw, _, _ := unstructured.NestedString(objectOf(t, base, "ConfigMap", "berth-provisioners").Object, "data", "provisioners.json")
	var set map[string]struct {
		Type string         `json:"type"`
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal([]byte(raw), &set); err != nil {
		t.Fatalf("the ConfigMap's provisioners.json: %v", err)
	}
	if len(set) != 1 {
		t.Fatalf("the ConfigMap's set has %d provisioners, want 1", len(set))
	}
	for name, p := range set {
		if p.Type != "kubernetes" || p.Spec["namespace"] != runtimesNamespace || p.Spec["kubeconfig_path"] != "" {
			t.Fatalf("provisioner %s: type %q, spec %v; want kubernetes in %s with the pod's service account", name, p.Type, p.Spec, runtimesNamespace)
		}
		return p.Spec
	}
	return nil
}

// checkProvisionerSet runs `berth check-config` on the ConfigMap's set as it is.
func checkProvisionerSet(t testing.TB, base []*unstructured.Unstructured) {
	t.Helper()
	raw, _, _ := unstructured.NestedString(objectOf(t, base, "ConfigMap", "berth-provisioners").Object, "data", "provisioners.json")
	path := filepath.Join(t.TempDir(), "provisioners.json")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e2etest.Binary(t), "check-config", "--provisioners", path)
	cmd.Env = append(os.Environ(), "BERTH_PROVISIONER_SET_JSON=", "BERTH_DEFAULT_PROVISIONER=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("berth check-config on the ConfigMap's set: %v\n%s", err, out)
	}
}

// waitNamespacesGone waits for namespaces an earlier run left terminating.
func waitNamespacesGone(t testing.TB, cs k8s.Interface, names ...string) {
	t.Helper()
	e2etest.Eventually(t, "namespaces of an earlier run gone", 3*time.Minute, func() (bool, string) {
		for _, n := range names {
			ns, err := cs.CoreV1().Namespaces().Get(context.Background(), n, metav1.GetOptions{})
			if err == nil && ns.DeletionTimestamp != nil {
				return false, n + " is terminating"
			}
		}
		return true, ""
	})
}

// dynamicClient is an admin dynamic client and a mapper of kinds to resources.
func dynamicClient(t testing.TB) (dynamic.Interface, *restmapper.DeferredDiscoveryRESTMapper) {
	t.Helper()
	cfg := adminConfig(t)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
}

func adminConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath(t))
	if err != nil {
		t.Fatalf("load BERTH_KUBECONFIG: %v", err)
	}
	return cfg
}

// serviceAccountKubeconfig writes a kubeconfig with a token of the agent's service account
// (TokenRequest API, one hour) and the cluster's CA, and returns its path.
func serviceAccountKubeconfig(t testing.TB, cs k8s.Interface) string {
	t.Helper()
	expiry := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(agentNamespace).CreateToken(context.Background(), agentAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of service account %s/%s: %v", agentNamespace, agentAccount, err)
	}
	admin := adminConfig(t)
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	if len(ca) == 0 {
		t.Fatal("the admin kubeconfig names no CA to trust the API server with")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["berth"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["berth"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "berth", Namespace: runtimesNamespace}
	cfg.CurrentContext = "berth"
	path := filepath.Join(t.TempDir(), "berth-sa.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func clientFor(t testing.TB, kubeconfig string) k8s.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func tokenOf(t testing.TB, kubeconfig string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token
}

// grantedPermissions is what a SelfSubjectRulesReview with the account's own token says it
// may do in the runtimes' namespace (what kubectl auth can-i --list shows), less what any
// service account may do there (discovery, self reviews: the review of an account nothing
// is bound to), as sorted "group resource verb" lines.
func grantedPermissions(t testing.TB, admin, account k8s.Interface) []string {
	t.Helper()
	review := func(cs k8s.Interface) map[string]bool {
		r, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(context.Background(), &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: runtimesNamespace},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("self subject rules review: %v", err)
		}
		if r.Status.Incomplete {
			t.Fatalf("the rules review is incomplete: %s", r.Status.EvaluationError)
		}
		out := map[string]bool{}
		for _, rule := range r.Status.ResourceRules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out[permission(g, res, v)] = true
					}
				}
			}
		}
		return out
	}
	cfg := rest.CopyConfig(adminConfig(t))
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + agentNamespace + ":berth-e2e-unbound",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + agentNamespace, "system:authenticated"},
	}
	unbound, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	anyAccount := review(unbound)
	var out []string
	for p := range review(account) {
		if !anyAccount[p] {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func permission(group, resource, verb string) string {
	if group == "" {
		group = "core"
	}
	return group + " " + resource + " " + verb
}

// documentedPermissions is the permissions table of deploy/kubernetes/README.md (between
// its permissions markers) as sorted "group resource verb" lines.
func documentedPermissions(t testing.TB) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(deployDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "<!-- permissions: begin -->":
			in = true
		case line == "<!-- permissions: end -->":
			in = false
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if len(cells) < 4 || cells[0] == "API group" || strings.HasPrefix(cells[0], "---") {
				continue
			}
			for _, v := range strings.Split(cells[2], ",") {
				out = append(out, permission(strings.TrimPrefix(cells[0], "core"), cells[1], strings.TrimSpace(v)))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("deploy/kubernetes/README.md has no permissions table between its markers")
	}
	sort.Strings(out)
	return out
}

func difference(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// withoutVerb takes verb from the rule of the agent's Role that grants it on resource, and
// waits until the account is denied it.
func withoutVerb(t testing.TB, cs k8s.Interface, group, resource, verb string) {
	t.Helper()
	ctx := context.Background()
	role, err := cs.RbacV1().Roles(runtimesNamespace).Get(ctx, "berth", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i, r := range role.Rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
			found = true
		}
	}
	if !found {
		t.Fatalf("the Role grants no %s on %s", verb, resource)
	}
	if _, err := cs.RbacV1().Roles(runtimesNamespace).Update(ctx, role, metav1.UpdateOptions{FieldManager: "berth-e2e"}); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, "the account denied "+verb+" on "+resource, time.Minute, func() (bool, string) {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + agentNamespace + ":" + agentAccount,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + agentNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: runtimesNamespace, Verb: verb, Group: group, Resource: resource},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !r.Status.Allowed, "still allowed"
	})
}

func grepLines(text, substr string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
