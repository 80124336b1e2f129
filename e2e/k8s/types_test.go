//go:build k8s

package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/e2etest"
)

// redisTypes is the "types" of the examples/types/redis spec fragment, with its template
// paths made absolute (the agent runs in a directory of its own).
func redisTypes(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "examples/types/redis/provisioners.json"))
	if err != nil {
		t.Fatal(err)
	}
	var set map[string]struct {
		Spec struct {
			Types map[string]map[string]any `json:"types"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	typesDef := set["k8s"].Spec.Types
	for _, def := range typesDef {
		paths := def["templates"].([]any)
		for i, p := range paths {
			paths[i] = filepath.Join(root, p.(string))
		}
	}
	js, err := json.Marshal(typesDef)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

// redisDeployment is the Deployment of redis resource id.
func redisDeployment(t testing.TB, e *e2etest.Env, ns, id string) *appsv1.Deployment {
	t.Helper()
	d, err := clientset(t).AppsV1().Deployments(ns).Get(context.Background(), "redis-"+strings.ReplaceAll(id, "-", ""), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("redis %s deployment: %v", id, err)
	}
	return d
}

// TestTypesRedisThroughItsLife runs the real agent with the example redis type defined in
// the provisioner set's spec alone (no Go): a redis resource is created and becomes ready
// (its Deployment rolled out by the cluster), reports the config its definition templates,
// is resized (its args change and its Deployment follows), hibernated (zero replicas, its
// Service kept) and woken, has its Deployment deleted and its Service edited out of band
// and repaired by the health checks, and is deleted with all its objects. The CLI learns
// the type and checks its args from the same set.
func TestTypesRedisThroughItsLife(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	ctx := context.Background()
	e := e2etest.New(t, provisionerSet(kubeSpec(t, ns, 90, `, "types": `+redisTypes(t))))
	a := startAgent(e)
	withSet := []string{"--provisioners", e.SetPath}

	// The CLI checks args against the type's schema, naming the field.
	if _, stderr, err := e.TryBerth(append(withSet, "resource", "create", "--type", "redis", "--name", "tiny", "--arg", "memory_mb=8")...); err == nil || !strings.Contains(stderr, "--arg memory_mb: minimum: got 8, want 64") {
		t.Fatalf("create with memory_mb=8: %v, stderr %q; want an error naming the arg", err, stderr)
	}
	id := e.Create(append(withSet, "--type", "redis", "--name", "cache", "--owner", "team-a")...)
	r := e.WaitReady(id, readyWithin)
	name := "redis-" + strings.ReplaceAll(id, "-", "")
	want := map[string]any{"host": name + "." + ns + ".svc", "port": "6379", "url": "redis://" + name + "." + ns + ".svc:6379/0", "password_secret_name": "", "password_secret_key": ""}
	if js, _ := json.Marshal(r.Config); string(js) != mustJSON(t, want) {
		t.Errorf("config %s, want %s", js, mustJSON(t, want))
	}
	d := redisDeployment(t, e, ns, id)
	if !rolledOut(d) || image(d) != "redis:7.2" || d.Spec.Template.Spec.Containers[0].Resources.Requests.Memory().String() != "256Mi" {
		t.Errorf("ready redis: image %s, requests %v, status %+v", image(d), d.Spec.Template.Spec.Containers[0].Resources.Requests, d.Status)
	}

	// Resize, with a password from a Secret of the user's: the Deployment follows, the
	// config names the Secret.
	e.Berth(append(withSet, "resource", "update", id, "--arg", "memory_mb=1024", "--arg", `password_secret={"name": "cache-auth", "key": "password"}`, "--wait", "--timeout", "3m")...)
	d = redisDeployment(t, e, ns, id)
	c := d.Spec.Template.Spec.Containers[0]
	if c.Resources.Requests.Memory().String() != "1Gi" || !strings.Contains(strings.Join(c.Args, " "), "--maxmemory 1024mb") || len(c.Env) != 1 || c.Env[0].ValueFrom.SecretKeyRef.Name != "cache-auth" || !rolledOut(d) {
		t.Errorf("resized redis: requests %v, args %q, env %+v, status %+v", c.Resources.Requests, c.Args, c.Env, d.Status)
	}
	if r := e.Get(id); r.Config["password_secret_name"] != "cache-auth" {
		t.Errorf("config after resize: %v", r.Config)
	}

	// Hibernate: zero replicas, no pod, the Service kept; wake: rolled out again.
	svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.Berth("resource", "hibernate", id)
	r = e.WaitResource(id, "hibernated", readyWithin, func(r e2etest.Resource) bool { return r.Status == "hibernated" })
	if d := redisDeployment(t, e, ns, id); d.Spec.Replicas == nil || *d.Spec.Replicas != 0 || d.Status.Replicas != 0 {
		t.Errorf("hibernated redis: replicas %v, status %+v", d.Spec.Replicas, d.Status)
	}
	if n := podsOf(t, cs, ns, id); n != 0 {
		t.Errorf("%d pods of the hibernated redis left", n)
	}
	if s, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || s.UID != svc.UID {
		t.Errorf("service while hibernated: %v", err)
	}
	e.Berth("resource", "wake", id)
	e.WaitReady(id, readyWithin)
	if d := redisDeployment(t, e, ns, id); !rolledOut(d) {
		t.Errorf("woken redis not rolled out: %+v", d.Status)
	}

	// Drift: the Deployment deleted and the Service's selector edited out of band are put
	// back.
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRepairEvent(t, e, id, "deployment "+name+" re-applied: missing")
	patch := []byte(`[{"op": "replace", "path": "/spec/selector", "value": {"app": "elsewhere"}}]`)
	if _, err := cs.CoreV1().Services(ns).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRepairEvent(t, e, id, "service "+name+" re-applied")
	e.Eventually("service selector restored", repairWithin, func() (bool, string) {
		s, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(s.Spec.Selector) > 0 && s.Spec.Selector["app"] == "" && s.Spec.Selector["berth.dev/resource-id"] == id, fmt.Sprint(s.Spec.Selector)
	})
	e.WaitReady(id, readyWithin)

	e.Berth("resource", "delete", id)
	e.WaitCount("deprovisioned", readyWithin, 0, "SELECT count(*) FROM resources")
	waitGone(t, cs, ns, repairWithin)
	a.Stop(t)
}

// TestTypesBadDefinitionRefusedByCheckConfig: berth check-config lists the types a set's
// provisioner serves, the defined ones included, and refuses a set whose type definition
// has a template of a kind Berth does not apply, naming the provisioner, where in the set,
// the field and the kinds it may use.
func TestTypesBadDefinitionRefusedByCheckConfig(t *testing.T) {
	dir := t.TempDir()
	cron := filepath.Join(dir, "cron.yaml")
	if err := os.WriteFile(cron, []byte("apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: {{ .Name }}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var defs map[string]map[string]any
	if err := json.Unmarshal([]byte(redisTypes(t)), &defs); err != nil {
		t.Fatal(err)
	}
	defs["redis"]["templates"] = []any{cron}
	set := filepath.Join(dir, "provisioners.json")
	if err := os.WriteFile(set, []byte(provisionerSet(kubeSpec(t, "berth-types", 60, `, "types": `+mustJSON(t, defs)))), 0o600); err != nil {
		t.Fatal(err)
	}
	e := e2etest.New(t, provisionerSet(kubeSpec(t, "berth-types", 60, `, "types": `+redisTypes(t))))
	if out := e.Berth("check-config", "--provisioners", e.SetPath); !strings.Contains(out, "namespace berth-types; serves runtime, clickhouse and redis") {
		t.Errorf("check-config of the redis set says:\n%s", out)
	}
	_, stderr, err := e.TryBerth("check-config", "--provisioners", set)
	want := `types.redis.templates.0: cron.yaml: document 1: batch/v1 "CronJob" is not a kind Berth manages; use one of`
	if err == nil || !strings.Contains(stderr, `provisioner "k8s" (kubernetes), line 2, column`) || !strings.Contains(stderr, want) {
		t.Fatalf("check-config of a CronJob template: %v, stderr %q; want %q", err, stderr, want)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}
