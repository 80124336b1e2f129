package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

func TestResourceEvents(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	id := decodeResource(t, c.mustRun("resource", "create", "--type", "runtime", "--name", "web", "-o", "json"))["id"].(string)
	one := int64(1)
	c.record(id, domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "provisioning generation 1"})
	c.record(id, domain.ProgressUpdate{Generation: 1, Status: domain.StatusReady, Reason: domain.ReasonAvailable, StatusMessage: "ready at generation 1", ObservedGeneration: &one})
	checked, err := c.st.GetResource(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.st.RecordHealth(ctx, id, checked.CheckedBy("test-agent"), domain.HealthUpdate{Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed, StatusMessage: "health check failing since then: 503",
		UnhealthySince: time.Now(), Repairs: []string{"reservation made again"}}); err != nil {
		t.Fatal(err)
	}

	var events []eventJSON
	decodeOne(t, c.mustRun("resource", "events", id, "-o", "json"), &events)
	var got []string
	for _, e := range events {
		got = append(got, string(e.Kind)+" "+e.Status+" "+e.Message)
	}
	want := []string{
		"status pending created",
		"status provisioning provisioning generation 1",
		"status ready ready at generation 1",
		"health unhealthy health check failing since then: 503",
		"repair unhealthy reservation made again",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	decodeOne(t, c.mustRun("resource", "events", id, "--limit", "2", "-o", "json"), &events)
	if len(events) != 2 || events[1].Kind != "repair" || events[0].Kind != "health" {
		t.Errorf("events --limit 2 = %+v, want the newest two, oldest first", events)
	}
	table := c.mustRun("resource", "events", id)
	if !strings.HasPrefix(table, "TIME ") || !strings.Contains(table, "health check failing since then: 503") {
		t.Errorf("events table:\n%s", table)
	}

	// The history outlives the row.
	c.mustRun("resource", "delete", id)
	claim, err := c.st.ClaimResource(ctx, id, "test-agent", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.st.FinalizeDelete(ctx, id, claim.Lease); err != nil {
		t.Fatal(err)
	}
	decodeOne(t, c.mustRun("resource", "events", id, "-o", "json"), &events)
	if last := events[len(events)-1]; last.Message != "removed" {
		t.Errorf("last event of a deleted resource = %+v, want removed", last)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"resource", "events", "00000000-0000-4000-8000-000000000000"}, "has no history"},
		{[]string{"resource", "events", "not-a-uuid"}, "resource ids are UUIDs"},
		{[]string{"resource", "events", id, "--limit", "0"}, "--limit: must be at least 1"},
		{[]string{"resource", "events"}, "needs exactly one resource ID"},
	} {
		if _, _, err := c.run(tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("berth %s: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}
