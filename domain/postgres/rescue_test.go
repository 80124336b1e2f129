package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// A client role may request a delete and move a failed resource to another provisioner,
// but not forget a resource: removing a row without deprovisioning is the agent's role's,
// as the client contract keeps the finalizing DELETE (migration 0012). The refusal says
// which role and what to do instead, and the row and its history are kept as they were.
func TestClientRoleCannotForgetAResource(t *testing.T) {
	ctx := testContext(t)
	agent, client, role := withClient(t)
	r, err := client.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "stranded", Provisioner: "nosuch", Args: map[string]any{}})
	if err != nil {
		t.Fatalf("create as client: %v", err)
	}
	_, err = client.ForgetResource(ctx, r.ID, domain.Forgetting{By: "mallory"})
	if !errors.Is(err, domain.ErrForbidden) || !strings.Contains(err.Error(), role) || !strings.Contains(err.Error(), "without --force") {
		t.Fatalf("forget as a client: %v, want ErrForbidden naming the role and the way out", err)
	}
	if _, err := agent.GetResource(ctx, r.ID); err != nil {
		t.Fatalf("a refused forget removed the row: %v", err)
	}
	events, err := agent.ListEvents(ctx, r.ID, 0)
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	for _, e := range events {
		if strings.HasPrefix(e.Message, "forgotten") {
			t.Fatalf("a refused forget left the event %q", e.Message)
		}
	}
	if moved, err := client.SetProvisioner(ctx, r.ID, "static"); err != nil || moved.Provisioner != "static" {
		t.Fatalf("set provisioner as client: %v", err)
	}

	forgotten, err := agent.ForgetResource(ctx, r.ID, domain.Forgetting{By: "ops"})
	if err != nil {
		t.Fatalf("forget as the agent's role: %v", err)
	}
	if forgotten.ID != r.ID {
		t.Fatalf("forget returned %s, want %s", forgotten.ID, r.ID)
	}
	events, err = agent.ListEvents(ctx, r.ID, 0)
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	if !slicesContainsPrefix(events, "forgotten without deprovisioning by ops (database role ") {
		t.Fatalf("events %v lack the forget naming the user and the database role", events)
	}
}

func slicesContainsPrefix(events []domain.Event, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e.Message, prefix) {
			return true
		}
	}
	return false
}
