package postgres_test

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
)

// The history trigger skips one write, the agent's one-transaction provision, which writes
// its own events; it is recognised by moving lease_token on without taking a lease. A client
// cannot make that write, and every other write, the agent's plain SQL included, is still
// recorded by the trigger, as is the change log's part of it.
func TestOnlyTheAgentsOwnProvisionSkipsTheHistoryTrigger(t *testing.T) {
	ctx := testContext(t)
	agent, client, _ := withClient(t)
	r, err := client.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "alice", Args: map[string]any{"slots": 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Pool().Exec(ctx, `UPDATE resources SET lease_token = lease_token + 1 WHERE id = $1`, r.ID)
	wantForbidden(t, "moving the lease token on", err, `column "lease_token"`)

	// The agent's own writes by hand: a status without a lease, then one that moves the
	// token on while taking a lease (as a claim does), each recorded by the trigger.
	mustExec(t, agent, `UPDATE resources SET status = 'provisioning', status_message = 'by hand' WHERE id = $1`, r.ID)
	mustExec(t, agent, `UPDATE resources SET lease_token = lease_token + 1, lease_holder = 'a', lease_expires_at = now() + interval '1 minute',
	                            status_message = 'claimed by hand' WHERE id = $1`, r.ID)
	// A write that changes nothing the history records calls nothing and records nothing.
	mustExec(t, agent, `UPDATE resources SET lease_expires_at = now() + interval '2 minutes' WHERE id = $1`, r.ID)
	// The provision's own write: the token moves on and the lease is let go.
	mustExec(t, agent, `UPDATE resources SET lease_token = lease_token + 1, lease_holder = NULL, lease_expires_at = NULL,
	                            status = 'ready', status_message = 'unrecorded' WHERE id = $1`, r.ID)
	// Pausing is recorded in both the history and the change log.
	changesBefore := countRows(t, agent, `SELECT count(*) FROM change_log WHERE resource_id = $1`, r.ID)
	if _, err := client.SetPaused(ctx, r.ID, true); err != nil {
		t.Fatal(err)
	}
	if got := countRows(t, agent, `SELECT count(*) FROM change_log WHERE resource_id = $1`, r.ID); got != changesBefore+1 {
		t.Errorf("change log rows after a pause: %d, want %d", got, changesBefore+1)
	}

	es, err := agent.EventsAfter(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, string(e.Status)+" "+e.Message)
	}
	want := []string{"pending created", "provisioning by hand", "provisioning claimed by hand", "ready paused"}
	if !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
}

// resource_events notifies once per statement: a statement of many events, as the agent's
// group of ready records inserts, wakes a listener as a single event does.
func TestAStatementOfManyEventsWakesEventListeners(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	r := mustCreate(t, st, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "web", Owner: "alice"})
	l, err := st.ListenEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	done := waitResult(ctx, l)
	mustExec(t, st, `INSERT INTO resource_events (resource_id, kind, status, message)
	                 SELECT $1, 'status', 'provisioning', 'step ' || i FROM generate_series(1, 3) i`, r.ID)
	if err := receive(t, done); err != nil {
		t.Fatalf("wait for the statement's events: %v", err)
	}
}

func countRows(t *testing.T, st *postgres.State, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := st.Pool().QueryRow(testContext(t), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A statement's new resources are logged once per statement (migration 0024): each row
// still gets its change-log entry and its 'created' event, in the statement's row order, and
// a row an INSERT ... ON CONFLICT updates instead is logged as an update.
func TestEveryNewResourceOfAStatementIsLogged(t *testing.T) {
	ctx := testContext(t)
	agent, client, _ := withClient(t)
	exec := func(sql string) {
		t.Helper()
		if _, err := client.Pool().Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO resources (type, name, owner, args) SELECT 'runtime', 'web-' || i, 'alice', '{}' FROM generate_series(1, 3) i`)
	exec(`INSERT INTO resources (type, name, owner, args) VALUES ('runtime', 'web-2', 'alice', '{"slots": 2}'), ('runtime', 'web-4', 'alice', '{}')
	      ON CONFLICT (owner, type, lower(name)) DO UPDATE SET args = EXCLUDED.args`)

	names := func(sql string) []string {
		t.Helper()
		rows, err := agent.Pool().Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	changes := names(`SELECT r.name FROM change_log c JOIN resources r ON r.id = c.resource_id ORDER BY c.seq`)
	if want := []string{"web-1", "web-2", "web-3", "web-2", "web-4"}; !slices.Equal(changes, want) {
		t.Errorf("change log %q, want %q (the upsert's update, then its insert)", changes, want)
	}
	events := names(`SELECT r.name || ' ' || e.status || ' ' || e.message FROM resource_events e JOIN resources r ON r.id = e.resource_id ORDER BY e.seq`)
	if want := []string{"web-1 pending created", "web-2 pending created", "web-3 pending created", "web-4 pending created"}; !slices.Equal(events, want) {
		t.Errorf("history %q, want %q", events, want)
	}
}
