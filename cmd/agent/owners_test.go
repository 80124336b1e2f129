package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

func TestOwnersListsOwnersWithResourcesOrAPolicy(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	if out := c.mustRun("owners"); !strings.Contains(out, "No owners") {
		t.Errorf("berth owners with none printed:\n%s", out)
	}
	for _, nr := range []domain.NewResource{
		{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "acme", Args: map[string]any{"slots": 1}},
		{Type: domain.ResourceTypeRuntime, Name: "db", Owner: "acme", Args: map[string]any{"slots": 1}},
		{Type: domain.ResourceTypeRuntime, Name: "solo", Args: map[string]any{"slots": 1}},
	} {
		if _, err := c.st.CreateResource(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	if out := c.mustRun("owners", "set", "acme", "--weight", "5", "--class", "gold"); !strings.Contains(out, "owner acme: weight 5, class gold") {
		t.Errorf("set printed %q", out)
	}
	if out := c.mustRun("owners", "set", "acme", "--class", "silver"); !strings.Contains(out, "weight 5, class silver") {
		t.Errorf("set of the class alone printed %q; want the weight kept", out)
	}
	c.mustRun("owners", "set", "idle-team", "--weight", "2")

	var listed []map[string]any
	decodeOne(t, c.mustRun("owners", "-o", "json"), &listed)
	want := []struct {
		owner             string
		weight, resources json.Number
		class             string
		policy            bool
	}{
		{"", "1", "1", "", false},
		{"acme", "5", "2", "silver", true},
		{"idle-team", "2", "0", "", true},
	}
	if len(listed) != len(want) {
		t.Fatalf("listed %v", listed)
	}
	for i, w := range want {
		o := listed[i]
		if o["owner"] != w.owner || o["weight"] != w.weight || o["resources"] != w.resources || o["queued"] != w.resources ||
			o["class"] != w.class || o["policy"] != w.policy || (o["updated_at"] != nil) != w.policy {
			t.Errorf("owner %d listed as %v; want %+v", i, o, w)
		}
	}
	out := c.mustRun("owners")
	for _, w := range []string{"OWNER", "WEIGHT", "CLASS", "RESOURCES", "QUEUED", "(none)", "acme", "silver"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
	if out := c.mustRun("owners", "-o", "yaml"); !strings.Contains(out, "owner: acme") {
		t.Errorf("-o yaml:\n%s", out)
	}

	c.mustRun("owners", "unset", "idle-team")
	if out := c.mustRun("owners"); strings.Contains(out, "idle-team") {
		t.Errorf("an owner without resources is listed after its policy was removed:\n%s", out)
	}

	c.mustRun("quota", "set", "acme", "--provisioner", "pool", "--resources", "5", "--slots", "16")
	c.mustRun("quota", "set", "quota-only", "--provisioner", "pool", "--resources", "1")
	out = c.mustRun("owners")
	for _, w := range []string{"QUOTAS", "pool 0/5 resources 0/16 slots", "quota-only", "pool 0/1 resources 0/none slots"} {
		if !strings.Contains(out, w) {
			t.Errorf("table with quotas lacks %q:\n%s", w, out)
		}
	}
	var withQuotas []struct {
		Owner  string `json:"owner"`
		Quotas []struct {
			Provisioner  string `json:"provisioner"`
			MaxResources *int64 `json:"max_resources"`
		} `json:"quotas"`
	}
	decodeOne(t, c.mustRun("owners", "-o", "json"), &withQuotas)
	quotas := map[string]string{}
	for _, o := range withQuotas {
		for _, q := range o.Quotas {
			quotas[o.Owner] = fmt.Sprintf("%s:%d", q.Provisioner, *q.MaxResources)
		}
	}
	if quotas["acme"] != "pool:5" || quotas["quota-only"] != "pool:1" || len(quotas) != 2 {
		t.Errorf("owners -o json gives the quotas %v; want acme pool:5 and quota-only pool:1", quotas)
	}
}

func TestOwnersSetAndUnsetErrors(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"owners", "set", "acme"}, exitUsage, "give --weight, --class or both"},
		{[]string{"owners", "set", "acme", "--weight", "0"}, exitUsage, "weight: 0 is out of range: give a whole number from 1 to 1000"},
		{[]string{"owners", "set", "acme", "--weight", "1001"}, exitUsage, "from 1 to 1000"},
		{[]string{"owners", "set", "acme", "--class", "Gold"}, exitUsage, "class: \"Gold\" is not a class"},
		{[]string{"owners", "unset", "acme"}, exitNotFound, "policy of owner \"acme\": not found"},
	} {
		_, _, err := c.run(tc.args...)
		if err == nil || exitCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("berth %s: %v (exit %d); want exit %d and %q", strings.Join(tc.args, " "), err, exitCode(err), tc.code, tc.msg)
		}
	}
}
