package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
)

// 0011 backfills status_changed_at from updated_at and changes nothing else of the rows
// (their triggers do not run for the backfill: updated_at stays, no event is recorded).
func TestLifecycleMigrationBackfillsStatusChangedAt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := migratedStateAt(ctx, t, 10)
	updated := time.Date(2026, 1, 2, 4, 5, 6, 789000, time.UTC)
	if _, err := st.pool.Exec(ctx, `
		INSERT INTO resources (type, name, status, status_message, created_at, updated_at)
		VALUES ('runtime', 'old', 'error', 'boom', $1, $1)`, updated); err != nil {
		t.Fatal(err)
	}
	var events int64
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM resource_events`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := st.ListResources(ctx, domain.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !rs[0].StatusChangedAt.Equal(updated) || !rs[0].UpdatedAt.Equal(updated) || rs[0].Status != domain.StatusError {
		t.Fatalf("after the migration: %+v; want status_changed_at and updated_at %v", rs, updated)
	}
	var after int64
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM resource_events`).Scan(&after); err != nil || after != events {
		t.Errorf("the migration recorded %d events (%v); want none", after-events, err)
	}
	r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: "new"})
	if err != nil || r.StatusChangedAt.IsZero() || time.Since(r.StatusChangedAt).Abs() > time.Minute {
		t.Errorf("a resource created after the migration: status changed at %v, %v; want now", r.StatusChangedAt, err)
	}
}

// 0014 drops the CHECK constraints on resources.type, resources.status and
// resource_events.kind, and no other constraint of the two tables.
func TestNamesMigrationDropsOnlyTheThreeChecks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := migratedStateAt(ctx, t, 13)
	constraints := func() []string {
		t.Helper()
		rows, err := st.pool.Query(ctx, `
			SELECT conname FROM pg_constraint
			 WHERE conrelid IN ('resources'::regclass, 'resource_events'::regclass) ORDER BY conname`)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	before := constraints()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dropped := []string{"resource_events_kind_check", "resources_status_check", "resources_type_check"}
	want := slices.DeleteFunc(slices.Clone(before), func(name string) bool { return slices.Contains(dropped, name) })
	if len(want) != len(before)-len(dropped) {
		t.Fatalf("constraints before 0014: %v; want %v among them", before, dropped)
	}
	if got := constraints(); !slices.Equal(got, want) {
		t.Errorf("constraints after 0014: %v; want %v", got, want)
	}
	r, err := st.CreateResource(ctx, domain.NewResource{Type: "widget", Name: "new-type"})
	if err != nil || r.Type != "widget" {
		t.Errorf("a resource of type widget after 0014: %+v, %v; want it stored", r, err)
	}
}
