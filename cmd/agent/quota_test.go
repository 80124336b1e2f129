package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// quotaKeys are exactly the keys -o json prints for a quota.
var quotaKeys = []string{"max_resources", "max_slots", "owner", "provisioner", "resources", "slots", "updated_at"}

func TestQuotaSetGetListUnset(t *testing.T) {
	c := newCLI(t)
	if out := c.mustRun("quota", "list"); !strings.Contains(out, "No quotas are set") {
		t.Errorf("quota list with none set printed:\n%s", out)
	}
	out := c.mustRun("quota", "set", "acme", "--provisioner", "pool", "--resources", "5", "--slots", "16")
	for _, want := range []string{"OWNER", "PROVISIONER", "RESOURCES", "SLOTS", "acme", "pool", "0/5", "0/16"} {
		if !strings.Contains(out, want) {
			t.Errorf("quota set printed no %q:\n%s", want, out)
		}
	}
	// A measure not given keeps its cap; none removes one.
	c.mustRun("quota", "set", "acme", "--provisioner", "pool", "--slots", "none")
	c.mustRun("quota", "set", "zed", "--provisioner", "k8s", "--slots", "8")

	var listed []map[string]any
	decodeOne(t, c.mustRun("quota", "list", "-o", "json"), &listed)
	if len(listed) != 2 {
		t.Fatalf("listed %v; want acme and zed", listed)
	}
	var keys []string
	for k := range listed[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, quotaKeys) {
		t.Errorf("quota keys %v; want %v", keys, quotaKeys)
	}
	if a := listed[0]; a["owner"] != "acme" || a["max_resources"] == nil || a["max_resources"].(interface{ String() string }).String() != "5" || a["max_slots"] != nil {
		t.Errorf("acme listed as %v; want 5 resources and no slot cap", a)
	}
	if yaml := c.mustRun("quota", "get", "zed", "-o", "yaml"); !strings.Contains(yaml, "max_slots: 8") || !strings.Contains(yaml, "owner: zed") {
		t.Errorf("quota get -o yaml:\n%s", yaml)
	}
	if table := c.mustRun("quota", "get", "acme", "--provisioner", "pool"); !strings.Contains(table, "0/none") {
		t.Errorf("quota get prints no uncapped slots:\n%s", table)
	}

	c.mustRun("quota", "unset", "zed", "--provisioner", "k8s")
	if _, _, err := c.run("quota", "get", "zed"); exitCode(err) != exitNotFound || !strings.Contains(err.Error(), `owner "zed" has no quota`) {
		t.Errorf("quota get of an owner with none: exit %d, %v; want %d", exitCode(err), err, exitNotFound)
	}
	if _, _, err := c.run("quota", "unset", "zed", "--provisioner", "k8s"); exitCode(err) != exitNotFound {
		t.Errorf("quota unset again: exit %d, %v; want %d", exitCode(err), err, exitNotFound)
	}
}

func TestQuotaSetRefusesBadValues(t *testing.T) {
	c := newCLI(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"acme", "--provisioner", "pool", "--resources", "-1"}, "--resources: must be 0 or more, got -1"},
		{[]string{"acme", "--provisioner", "pool", "--slots=-4"}, "--slots: must be 0 or more, got -4"},
		{[]string{"acme", "--provisioner", "pool", "--slots", "many"}, `--slots: "many" is not a whole number`},
		{[]string{"acme", "--provisioner", "pool"}, "give --resources, --slots or both"},
		{[]string{"acme", "--resources", "1"}, "--provisioner: required"},
	} {
		_, _, err := c.run(append([]string{"quota", "set"}, tt.args...)...)
		if exitCode(err) != exitUsage || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("quota set %v: exit %d, %v; want %d and %q", tt.args, exitCode(err), err, exitUsage, tt.want)
		}
	}
	if out := c.mustRun("quota", "list"); !strings.Contains(out, "No quotas are set") {
		t.Errorf("a refused set wrote a quota:\n%s", out)
	}
}

// A quota below the owner's usage is set, with a warning that nothing is evicted.
func TestQuotaBelowUsageWarns(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		r, err := c.st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "acme", Args: map[string]any{"slots": 2}})
		if err != nil {
			t.Fatal(err)
		}
		claim, err := c.st.ClaimResource(ctx, r.ID, "agent-1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.st.AdmitResource(ctx, r.ID, claim.Lease, domain.Admission{Provisioner: "pool", Units: 2}); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, err := c.run("quota", "set", "acme", "--provisioner", "pool", "--resources", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "2/1") || !strings.Contains(out, "4/none") {
		t.Errorf("quota set printed:\n%s", out)
	}
	want := `warning: owner "acme" holds 2 resources (quota 1) on provisioner "pool", above the quota: nothing is evicted`
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr %q; want %q", errOut, want)
	}
}

func TestDescribeSaysAResourceWaitsForQuota(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tt := range []struct {
		name string
		r    domain.Resource
		want string
	}{
		{"create", domain.Resource{Status: domain.StatusPending, Reason: domain.ReasonQuotaExceeded, Owner: "acme", Provisioner: "pool",
			NextAttemptAt: at(30 * time.Second), StateTimes: domain.StateTimes{WaitingSince: at(-5 * time.Minute)}},
			"waiting for quota since 2026-12-01T11:55:00Z (5m ago): tried again at 2026-12-01T12:00:30Z (in 30s), or sooner when its owner's usage drops or the quota rises " +
				"(`berth quota get \"acme\" --provisioner \"pool\"` shows the quota)"},
		{"resize", domain.Resource{Status: domain.StatusReady, Reason: domain.ReasonQuotaExceeded, Owner: "acme", Provisioner: "pool",
			Generation: 3, ObservedGeneration: 2},
			"serving generation 2 while generation 3 waits for quota: when its owner's usage drops or the quota rises " +
				"(`berth quota get \"acme\" --provisioner \"pool\"` shows the quota)"},
	} {
		if got := nextAttempt(tt.r, now); got != tt.want {
			t.Errorf("%s: next attempt\n%q, want\n%q", tt.name, got, tt.want)
		}
	}
}
