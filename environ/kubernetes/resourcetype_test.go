package kubernetes

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// TestUnknownTypeIsAPermanentErrorNamingTheServedTypes: every entry point that needs the
// type's entry refuses a type the environ does not serve, for good, naming the type and
// the types it serves.
func TestUnknownTypeIsAPermanentErrorNamingTheServedTypes(t *testing.T) {
	e, _ := newTestEnviron(t, testSpec)
	r := &environ.Resource{ID: testID, Type: "queue"}
	if e.Supports(r.Type) {
		t.Error("Supports(queue) = true")
	}
	want := `provisioner "k8s" is of type kubernetes, which provisions runtime and clickhouse resources, not queue: choose a provisioner that supports queue`
	_, reconcileErr := e.Reconcile(t.Context(), r, nil)
	_, hibernateErr := e.Hibernate(t.Context(), r, nil)
	_, checkErr := e.CheckResource(t.Context(), r, nil)
	awaitErr := e.AwaitReady(t.Context(), r)
	for name, err := range map[string]error{"Reconcile": reconcileErr, "Hibernate": hibernateErr, "CheckResource": checkErr, "AwaitReady": awaitErr} {
		if err == nil || err.Error() != want || !environ.IsPermanent(err) {
			t.Errorf("%s: %v (permanent %v), want the permanent error %q", name, err, environ.IsPermanent(err), want)
		}
	}
}

// TestTypeTable: each served type is in the table once, renders templates of its own and
// says what runs it; templateKeys (the template_paths keys a spec may set) are theirs.
func TestTypeTable(t *testing.T) {
	seen := map[domain.ResourceType]bool{}
	owner := map[string]domain.ResourceType{}
	var keys []string
	for _, rt := range resourceTypes {
		if seen[rt.name] {
			t.Errorf("type %s is in the table twice", rt.name)
		}
		seen[rt.name] = true
		if rt.prefix == "" || rt.workload.client == nil || rt.prepare == nil || rt.checkSample == nil || rt.config == nil || len(rt.templates) == 0 {
			t.Errorf("type %s: entry incomplete: %+v", rt.name, rt)
		}
		for _, k := range rt.templates {
			if other, dup := owner[k]; dup {
				t.Errorf("template %s is rendered by %s and %s", k, other, rt.name)
			}
			owner[k] = rt.name
		}
		keys = append(keys, rt.templates...)
		if got, ok := lookupType(rt.name); !ok || got.name != rt.name {
			t.Errorf("lookupType(%s) = %v, %v", rt.name, got.name, ok)
		}
	}
	if strings.Join(keys, ",") != strings.Join(templateKeys, ",") {
		t.Errorf("templateKeys = %v, want %v", templateKeys, keys)
	}
	for _, name := range []domain.ResourceType{domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse} {
		if !seen[name] {
			t.Errorf("type %s is not served", name)
		}
	}
}
