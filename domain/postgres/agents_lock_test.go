package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// A heartbeat renewing an agent's leases locks their rows in id order, as the groups of claims
// and progress records do, so it cannot deadlock with a transaction that holds one of those
// rows and wants another: here one holding the lower id, wanting a higher one the table holds
// first (which is the order a scan of the table or the lease index would lock them in).
func TestHeartbeatLocksLeasedRowsInIDOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := migratedState(ctx, t)
	session, err := st.RegisterAgent(ctx, domain.AgentInfo{ID: "agent-a", Version: "v1", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const high, low = "ffffffff-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000001"
	for i, id := range []string{high, low} {
		if _, err := st.pool.Exec(ctx, `
			INSERT INTO resources (id, type, name, owner, lease_holder, lease_expires_at)
			VALUES ($1, 'runtime', $2, 'o', 'agent-a', now() + interval '1 minute')`, id, "r"+string(rune('0'+i))); err != nil {
			t.Fatal(err)
		}
	}

	group, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer group.Rollback(context.WithoutCancel(ctx))
	if _, err := group.Exec(ctx, `SELECT 1 FROM resources WHERE id = $1 FOR UPDATE`, low); err != nil {
		t.Fatal(err)
	}
	heartbeat := make(chan error, 1)
	go func() { heartbeat <- st.HeartbeatAgent(ctx, "agent-a", session) }()
	// The heartbeat waits for the row the transaction holds.
	for waiting := false; !waiting; {
		select {
		case err := <-heartbeat:
			t.Fatalf("the heartbeat ended (%v) while a row it renews was locked", err)
		case <-ctx.Done():
			t.Fatal("the heartbeat never waited for the locked row")
		case <-time.After(10 * time.Millisecond):
		}
		if err := st.pool.QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := group.Exec(ctx, `SELECT 1 FROM resources WHERE id = $1 FOR UPDATE`, high); err != nil {
		t.Fatalf("the transaction holding the lower id could not lock the higher one: %v", err)
	}
	if err := group.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-heartbeat; err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
}
