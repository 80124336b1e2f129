package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/domain/statetest"
	"github.com/berth-dev/berth/internal/pgtest"
)

// The group of one-transaction provisions takes an idle connection without the pool's
// liveness ping. When every connection of the pool died while idle (the server restarted),
// the provision still succeeds: the group's transaction fails on its dead connection and
// the call runs again alone, on a connection the pool pings and replaces.
func TestInstantProvisionSurvivesConnectionsThatDiedIdle(t *testing.T) {
	ctx := testContext(t)
	url := pgtest.New(t)
	st, err := postgres.Open(ctx, url, postgres.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	first, second := mustCreate(t, st, runtime("first")), mustCreate(t, st, runtime("second"))
	req, pick := statetest.InstantProvision(first, nil)
	if _, err := st.ReserveSlots(ctx, req, pick); err != nil {
		t.Fatalf("provision the first resource: %v", err)
	}
	// Both connections of the pool open, then idle past the time after which the pool
	// pings a connection before handing it out.
	var held []*pgxpool.Conn
	for range 2 {
		c, err := st.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	time.Sleep(1100 * time.Millisecond)

	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed int
	if err := admin.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 2 {
		t.Fatalf("terminated %d connections of the pool, want its 2", killed)
	}

	req, pick = statetest.InstantProvision(second, nil)
	res, err := st.ReserveSlots(ctx, req, pick)
	if err != nil {
		t.Fatalf("provision after the pool's %d connections died idle: %v", killed, err)
	}
	if res.Host != "h1" {
		t.Errorf("reserved on %q, want h1", res.Host)
	}
	got, err := st.GetResource(ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != domain.StatusReady || got.ReadyAt == nil {
		t.Errorf("second resource is %s (ready_at %v), want ready", got.Status, got.ReadyAt)
	}
}

// On a warm pool, whose connections ran the group's statements on no rows when they opened,
// the group runs them on its rows: a one-transaction provision records its resource ready.
func TestInstantProvisionOnAWarmPool(t *testing.T) {
	ctx := testContext(t)
	url := pgtest.New(t)
	plain, err := postgres.Open(ctx, url, postgres.PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(ctx, url, postgres.PoolConfig{MaxConns: 2, Warm: true})
	if err != nil {
		t.Fatalf("open warm: %v", err)
	}
	t.Cleanup(st.Close)
	for i, name := range []string{"first", "second"} {
		r := mustCreate(t, st, runtime(name))
		req, pick := statetest.InstantProvision(r, nil)
		res, err := st.ReserveSlots(ctx, req, pick)
		if err != nil {
			t.Fatalf("provision %s on the warm pool: %v", name, err)
		}
		got, err := st.GetResource(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.Host != "h1" || got.Status != domain.StatusReady || got.ReadyAt == nil {
			t.Errorf("provision %d: on %q, %s (ready_at %v); want ready on h1", i, res.Host, got.Status, got.ReadyAt)
		}
	}
}
