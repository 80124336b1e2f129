package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/pgtest"
	"github.com/berth-dev/berth/internal/testkit"
)

// stalledHeartbeat runs on a connection of st what HeartbeatAgent runs for agent id's
// session, up to its commit, and leaves the transaction open: what an agent stopped between
// the heartbeat's last statement and its COMMIT leaves behind. Every row the agent leases is
// locked FOR UPDATE until the transaction ends.
func stalledHeartbeat(ctx context.Context, t *testing.T, st *State, id string, session int64) *pgxpool.Conn {
	t.Helper()
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var leaseTTLMillis int64
	for _, step := range []func() error{
		func() error { _, err := conn.Exec(ctx, `BEGIN`); return err },
		func() error {
			return conn.QueryRow(ctx, `UPDATE agents SET heartbeat_at = now() WHERE id = $1 AND session = $2
				RETURNING lease_ttl_ms`, id, session).Scan(&leaseTTLMillis)
		},
		func() error { _, err := conn.Exec(ctx, heartbeatLeasesSQL, id, leaseTTLMillis); return err },
	} {
		if err := step(); err != nil {
			conn.Release()
			t.Fatal(err)
		}
	}
	return conn
}

// waitForALockWait waits until a session of st's database waits for a lock, and fails the
// test if none does within a minute.
func waitForALockWait(ctx context.Context, t *testing.T, st *State) {
	t.Helper()
	testkit.Within(t, time.Minute, func() error {
		var waiting int
		if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			return err
		}
		if waiting == 0 {
			return errors.New("no session waits for a lock")
		}
		return nil
	})
}

// An agent stopped with a transaction open holds its rows' locks for as long as it stays
// stopped: another agent's claim of a resource whose lease has expired waits behind them.
// With IdleInTransactionTimeout, the server ends the stopped agent's session once its
// transaction has been idle that long, which rolls it back: the claim goes on and takes the
// resource over, and the stopped agent's store opens a new connection for its next statement.
func TestAStalledTransactionHoldsClaimsBackOnlyUntilItsIdleTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := pgtest.New(t)
	two, err := Open(ctx, dbURL, PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	if err := two.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		idle time.Duration
		id   string
	}{
		{"no timeout", 0, "00000000-0000-0000-0000-00000000000a"},
		{"timeout", 2 * time.Second, "00000000-0000-0000-0000-00000000000b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, err := Open(ctx, dbURL, PoolConfig{IdleInTransactionTimeout: tc.idle})
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			agentID := "agent-one-" + strings.ReplaceAll(tc.name, " ", "-")
			session, err := one.RegisterAgent(ctx, domain.AgentInfo{ID: agentID, Version: "v1", LeaseTTL: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := two.pool.Exec(ctx, `
				INSERT INTO resources (id, type, name, owner, lease_holder, lease_expires_at)
				VALUES ($1, 'runtime', $2, 'o', $3, now() + interval '100 milliseconds')`, tc.id, tc.id, agentID); err != nil {
				t.Fatal(err)
			}
			stalled := stalledHeartbeat(ctx, t, one, agentID, session)
			defer stalled.Release()
			// The lease the stopped heartbeat would have renewed expires, as the others see it.
			testkit.Eventually(t, func() error {
				var expired bool
				if err := two.pool.QueryRow(ctx, `SELECT lease_expires_at < now() FROM resources WHERE id = $1`, tc.id).Scan(&expired); err != nil {
					return err
				}
				if !expired {
					return errors.New("the lease has not expired")
				}
				return nil
			})

			// With no timeout the claim waits for good: its deadline ends it. With one, the
			// claim goes on once the stalled session is ended, well before its deadline.
			claimFor := 30 * time.Second
			if tc.idle == 0 {
				claimFor = 3 * time.Second
			}
			claimCtx, cancelClaim := context.WithTimeout(ctx, claimFor)
			defer cancelClaim()
			claimed := make(chan error, 1)
			var claim domain.Claim
			go func() {
				var err error
				claim, err = two.ClaimResource(claimCtx, tc.id, "agent-two", time.Minute)
				claimed <- err
			}()
			waitForALockWait(ctx, t, two)
			err = <-claimed

			if tc.idle == 0 {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("claim behind a stalled transaction with no idle timeout: %v, want it still waiting at its deadline", err)
				}
				if _, err := stalled.Exec(ctx, `ROLLBACK`); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err != nil {
				t.Fatalf("claim behind a stalled transaction with an idle timeout: %v", err)
			}
			if claim.Takeover == nil || claim.Takeover.PreviousHolder != agentID {
				t.Errorf("claim took over %+v, want the lease of %s", claim.Takeover, agentID)
			}
			_, err = stalled.Exec(ctx, `COMMIT`)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "25P03" {
				t.Errorf("the stalled transaction's COMMIT: %v, want the server's idle-in-transaction timeout (25P03)", err)
			}
			if err := one.Ping(ctx); err != nil {
				t.Errorf("the stopped agent's store after its session was ended: %v", err)
			}
			if err := one.HeartbeatAgent(ctx, agentID, session); err != nil {
				t.Errorf("the stopped agent's next heartbeat: %v", err)
			}
		})
	}
}

// The idle-in-transaction timeout is every connection's of both pools, unless the URL sets
// the server's setting itself.
func TestIdleInTransactionTimeoutIsEachConnectionsUnlessTheURLSetsIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := pgtest.New(t)
	show := func(t *testing.T, pool *pgxpool.Pool) string {
		t.Helper()
		var got string
		if err := pool.QueryRow(ctx, `SHOW `+idleInTransactionParam).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	st, err := Open(ctx, dbURL, PoolConfig{IdleInTransactionTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got, log := show(t, st.pool), show(t, st.changeLog); got != "1500ms" || log != "1500ms" {
		t.Errorf("%s = %s on the main pool and %s on the change log's, want 1500ms", idleInTransactionParam, got, log)
	}
	plain, err := Open(ctx, dbURL, PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if got := show(t, plain.pool); got != "0" {
		t.Errorf("%s = %s with no timeout asked for, want the server's 0", idleInTransactionParam, got)
	}
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	chosen, err := Open(ctx, dbURL+sep+idleInTransactionParam+"=0", PoolConfig{IdleInTransactionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer chosen.Close()
	if got := show(t, chosen.pool); got != "0" {
		t.Errorf("%s = %s on a pool whose URL sets it to 0, want 0", idleInTransactionParam, got)
	}
	if _, err := Open(ctx, dbURL, PoolConfig{IdleInTransactionTimeout: -time.Second}); err == nil || !strings.Contains(err.Error(), "IdleInTransactionTimeout") {
		t.Errorf("Open with a negative timeout: %v, want an error naming IdleInTransactionTimeout", err)
	}
}
