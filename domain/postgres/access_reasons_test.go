package postgres_test

import (
	"testing"

	"github.com/berth-dev/berth/domain"
)

// reason, waiting_since and last_attempt_at are the agent's: a client's write of them is
// refused naming the column, on UPDATE and INSERT alike; its delete request, as a DELETE or
// as the move to deleting it may make, gets the reason DeleteRequested.
func TestClientRoleCannotWriteTheReason(t *testing.T) {
	ctx := testContext(t)
	agent, dbURL := migratedAt(t)
	role, clientURL := clientRole(t, agent, dbURL)
	if err := agent.GrantClientRole(ctx, role); err != nil {
		t.Fatal(err)
	}
	client := openAs(t, clientURL)
	create := func(name string) domain.Resource {
		t.Helper()
		r, err := client.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "alice", Args: map[string]any{"slots": 1}})
		if err != nil {
			t.Fatalf("create as a client: %v", err)
		}
		if r.Reason != domain.ReasonCreated {
			t.Fatalf("created by a client: reason %q, want Created", r.Reason)
		}
		return r
	}
	r := create("web")
	exec := func(sql string, args ...any) error {
		_, err := client.Pool().Exec(ctx, sql, args...)
		return err
	}
	for _, forgery := range []struct{ sql, names string }{
		{`UPDATE resources SET reason = 'Available' WHERE id = $1`, `column "reason"`},
		{`UPDATE resources SET waiting_since = now() WHERE id = $1`, `column "waiting_since"`},
		{`UPDATE resources SET last_attempt_at = now() WHERE id = $1`, `column "last_attempt_at"`},
		{`UPDATE resources SET status = 'deleting', status_message = 'delete requested', reason = 'Backoff' WHERE id = $1`, `column "reason"`},
	} {
		wantForbidden(t, forgery.sql, exec(forgery.sql, r.ID), forgery.names)
	}
	for _, forgery := range []struct{ sql, names string }{
		{`INSERT INTO resources (type, name, owner, reason) VALUES ('runtime', 'forged', 'alice', 'Available')`, `column "reason"`},
		{`INSERT INTO resources (type, name, owner, waiting_since) VALUES ('runtime', 'forged', 'alice', now())`, `column "waiting_since"`},
		{`INSERT INTO resources (type, name, owner, last_attempt_at) VALUES ('runtime', 'forged', 'alice', now())`, `column "last_attempt_at"`},
	} {
		wantForbidden(t, forgery.sql, exec(forgery.sql), forgery.names)
	}

	// The agent's waiting row, deleted by the client both ways.
	byUpdate := create("by-update")
	for _, id := range []string{r.ID, byUpdate.ID} {
		if _, err := agent.Pool().Exec(ctx, `UPDATE resources SET reason = 'WaitingForCapacity', waiting_since = now(), status_message = 'waiting' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := exec(`DELETE FROM resources WHERE id = $1`, r.ID); err != nil {
		t.Fatalf("delete as a client: %v", err)
	}
	if err := exec(`UPDATE resources SET status = 'deleting', status_message = 'delete requested' WHERE id = $1`, byUpdate.ID); err != nil {
		t.Fatalf("move to deleting as a client: %v", err)
	}
	for _, id := range []string{r.ID, byUpdate.ID} {
		got, err := client.GetResource(ctx, id)
		if err != nil || got.Status != domain.StatusDeleting || got.Reason != domain.ReasonDeleteRequested || got.WaitingSince != nil {
			t.Fatalf("after a client's delete request: %s %s, waiting since %v, %v; want deleting DeleteRequested, no wait", got.Status, got.Reason, got.WaitingSince, err)
		}
	}
}
