package monitoring_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// object is one rendered Kubernetes object, as far as the test reads it.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
	Spec map[string]any    `json:"spec"`
}

// TestComponentRendersWithTheBase renders an overlay as an operator writes one (the base
// deploy/kubernetes plus this component) with kubectl kustomize: the base's agents are
// still there, and the component adds the dashboard as a ConfigMap Grafana's sidecar loads
// (label grafana_dashboard) holding dashboard.json unchanged, and the PrometheusRule as
// prometheusrule.yaml has it, both in the agents' namespace.
func TestComponentRendersWithTheBase(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is not installed: install Debian's kubectl package (apt-get install kubectl) to render the kustomize component (%v)", err)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	overlay := t.TempDir()
	// kustomize takes relative paths only.
	rel, err := filepath.Rel(overlay, here)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		"resources:\n  - " + filepath.ToSlash(filepath.Join(rel, baseDir)) + "\n" +
		"components:\n  - " + filepath.ToSlash(rel) + "\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", overlay).Output()
	if err != nil {
		stderr := ""
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			stderr = string(exit.Stderr)
		}
		t.Fatalf("kubectl kustomize of the base with the component: %v\n%s", err, stderr)
	}
	objects := map[string]object{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("decode a rendered object: %v\n%s", err, doc)
		}
		objects[o.Kind+"/"+o.Metadata.Name] = o
	}
	if _, ok := objects["Deployment/berth"]; !ok {
		t.Errorf("the overlay lost the base's Deployment berth; rendered %d objects", len(objects))
	}

	cm, ok := objects["ConfigMap/berth-dashboard"]
	if !ok {
		t.Fatalf("the component renders no ConfigMap berth-dashboard")
	}
	if cm.Metadata.Namespace != "berth" || cm.Metadata.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap berth-dashboard is in namespace %q with labels %v, want namespace berth and grafana_dashboard: \"1\"",
			cm.Metadata.Namespace, cm.Metadata.Labels)
	}
	dashboard, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[dashboardFile] != string(dashboard) {
		t.Errorf("ConfigMap berth-dashboard's %s is not %s as checked in (keys %v)", dashboardFile, dashboardFile, keys(cm.Data))
	}

	rule, ok := objects["PrometheusRule/berth"]
	if !ok {
		t.Fatalf("the component renders no PrometheusRule berth")
	}
	var want object
	readYAML(t, prometheusRuleFile, &want)
	if rule.Metadata.Namespace != "berth" || !reflect.DeepEqual(rule.Spec, want.Spec) {
		t.Errorf("PrometheusRule berth is in namespace %q and its spec differs from %s's", rule.Metadata.Namespace, prometheusRuleFile)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
