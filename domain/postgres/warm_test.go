package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-dev/berth/internal/pgtest"
)

// openWarm opens a State on url whose pool of size conns is warmed, and waits for the pool
// to have opened all of them, in the background: no caller acquires more than one here.
func openWarm(t *testing.T, ctx context.Context, url string, conns int32) *State {
	t.Helper()
	st, err := Open(ctx, url, PoolConfig{MaxConns: conns, Warm: true})
	if err != nil {
		t.Fatalf("open warm: %v", err)
	}
	t.Cleanup(st.Close)
	for st.pool.Stat().TotalConns() < conns {
		select {
		case <-ctx.Done():
			t.Fatalf("the warm pool opened %d of its %d connections ahead", st.pool.Stat().TotalConns(), conns)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return st
}

// eachConn calls f with each of the pool's connections, all held at once.
func eachConn(t *testing.T, ctx context.Context, pool *pgxpool.Pool, conns int, f func(*pgxpool.Conn)) {
	t.Helper()
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		f(c)
	}
}

// generics returns the statements prepared on c, each with how many generic plans the
// server made for it.
func generics(t *testing.T, ctx context.Context, c *pgxpool.Conn) map[string]int64 {
	t.Helper()
	planned := make(map[string]int64)
	var (
		statement string
		generic   int64
	)
	rows, _ := c.Query(ctx, `SELECT statement, generic_plans FROM pg_prepared_statements`)
	if _, err := pgx.ForEachRow(rows, []any{&statement, &generic}, func() error {
		planned[statement] = generic
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return planned
}

// A warm pool opens all its connections ahead, and each has the statements of a group of
// one-transaction provisions prepared, with the generic plans the group runs them on,
// before any group ran; the warming wrote nothing and left no transaction open.
func TestWarmPoolOpensItsConnectionsReadyForProvisions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := pgtest.New(t)
	plain, err := Open(ctx, url, PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	st := openWarm(t, ctx, url, 3)

	want := map[string]string{
		"instantLockSQL": instantLockSQL, "hostUsageSQL": hostUsageSQL, "ownersUsageSQL": ownersUsageSQL,
		"instantReadyTimesSQL": instantReadyTimesSQL, "instantReadyRowsSQL": instantReadyRowsSQL,
		"instantWarmReadyTimesSQL": instantWarmReadyTimesSQL, "instantWarmReadyRowsSQL": instantWarmReadyRowsSQL,
		"instantReservationsSQL": instantReservationsSQL, "hostRoomSQL": hostRoomSQL,
	}
	eachConn(t, ctx, st.pool, 3, func(c *pgxpool.Conn) {
		planned := generics(t, ctx, c)
		for name, query := range want {
			if generic, ok := planned[query]; !ok || generic < 1 {
				t.Errorf("connection %d: %s prepared %v with %d generic plans; want prepared with one", c.Conn().PgConn().PID(), name, ok, generic)
			}
		}
		if status := c.Conn().PgConn().TxStatus(); status != 'I' {
			t.Errorf("connection %d is in transaction status %q after warming; want idle", c.Conn().PgConn().PID(), status)
		}
	})
	for _, table := range []string{"resources", "change_log", "resource_events", "slot_reservations", "slot_host_usage", "slot_owner_usage"} {
		var n int
		if err := plain.pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s has %d rows after the warming; want none", table, n)
		}
	}
}

// On a database without Berth's schema (an agent that starts before migrating it), the
// connections open unwarmed and serve all the same; once Migrate has applied the schema,
// they are warm.
func TestWarmPoolWarmsItsConnectionsOnceMigrated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := openWarm(t, ctx, pgtest.New(t), 2)
	eachConn(t, ctx, st.pool, 2, func(c *pgxpool.Conn) {
		var one int
		if err := c.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil || one != 1 {
			t.Errorf("connection %d: SELECT 1 = %d, %v", c.Conn().PgConn().PID(), one, err)
		}
		if status := c.Conn().PgConn().TxStatus(); status != 'I' {
			t.Errorf("connection %d is in transaction status %q; want idle", c.Conn().PgConn().PID(), status)
		}
		if _, ok := generics(t, ctx, c)[instantWarmReadyTimesSQL]; ok {
			t.Errorf("connection %d has the group's statement prepared before the schema exists", c.Conn().PgConn().PID())
		}
	})
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eachConn(t, ctx, st.pool, 2, func(c *pgxpool.Conn) {
		if generic, ok := generics(t, ctx, c)[instantWarmReadyTimesSQL]; !ok || generic < 1 {
			t.Errorf("connection %d after the migration: the group's statement prepared %v with %d generic plans; want prepared with one", c.Conn().PgConn().PID(), ok, generic)
		}
	})
}
