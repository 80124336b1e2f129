package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// 0011 builds resources and resource_events again: every row stays as it was, rowids
// (ListResources' tiebreak) and the events' sequence included, and status_changed_at is
// backfilled from updated_at.
// migratedTo opens a State on a new file migrated up to version (0: every migration), and a
// context bounding the test.
func migratedTo(t *testing.T, version int) (context.Context, *State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	st, err := Open(ctx, filepath.Join(t.TempDir(), "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.migrateTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	return ctx, st
}

func TestLifecycleMigrationKeepsTheRows(t *testing.T) {
	ctx, st := migratedTo(t, 10)
	db := st.DB()
	const (
		first   = "00000000-0000-4000-8000-000000000002"
		second  = "00000000-0000-4000-8000-000000000001"
		created = "2026-01-02T03:04:05.000Z"
		updated = "2026-01-02T04:05:06.789Z"
	)
	for _, stmt := range []string{
		`INSERT INTO resources (id, type, name, args, created_at, updated_at) VALUES ('` + first + `', 'runtime', 'first', '{"slots": 2}', '` + created + `', '` + updated + `')`,
		`INSERT INTO resources (id, type, name, status, status_message, created_at, updated_at) VALUES ('` + second + `', 'clickhouse', 'second', 'error', 'boom', '` + created + `', '` + updated + `')`,
		`INSERT INTO resource_events (resource_id, kind, status, message) VALUES ('` + first + `', 'status', 'pending', 'pruned')`,
		`DELETE FROM resource_events WHERE message = 'pruned'`,
		// A client's own view on both tables, which must outlive their rebuilding.
		`CREATE VIEW client_history AS SELECT r.name, e.message FROM resources r JOIN resource_events e ON e.resource_id = r.id`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	rowids := func() (a, b int64) {
		t.Helper()
		if err := db.QueryRowContext(ctx, `SELECT (SELECT rowid FROM resources WHERE id = $1), (SELECT rowid FROM resources WHERE id = $2)`, first, second).Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	var sequence int64
	if err := db.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'resource_events'`).Scan(&sequence); err != nil {
		t.Fatal(err)
	}
	firstRow, secondRow := rowids()
	eventsBefore, err := st.EventsAfter(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}

	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var viewed int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM client_history`).Scan(&viewed); err != nil || viewed != 2 {
		t.Errorf("a client's view after the migration: %d rows, %v; want the two creation events", viewed, err)
	}
	if a, b := rowids(); a != firstRow || b != secondRow {
		t.Errorf("rowids %d, %d after the migration; want %d, %d", a, b, firstRow, secondRow)
	}
	rs, err := st.ListResources(ctx, domain.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].ID != first || rs[1].ID != second {
		t.Fatalf("resources after the migration: %+v; want first, then second", rs)
	}
	for _, r := range rs {
		if got := FormatTime(r.StatusChangedAt); got != updated || FormatTime(r.UpdatedAt) != updated || FormatTime(r.CreatedAt) != created {
			t.Errorf("%s: created %v, updated %v, status changed %v; want %s, %s and %s", r.Name, r.CreatedAt, r.UpdatedAt, r.StatusChangedAt, created, updated, updated)
		}
		if r.Paused || r.Hibernate || r.RetryRequestedAt != nil || len(r.Labels) != 0 || !r.Readable() {
			t.Errorf("%s after the migration: %+v; want no controls set", r.Name, r)
		}
	}
	if rs[1].Status != domain.StatusError || rs[1].StatusMessage != "boom" || rs[0].Args["slots"] != float64(2) {
		t.Errorf("columns changed by the migration: %+v", rs)
	}
	eventsAfter, err := st.EventsAfter(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(eventsAfter) != len(eventsBefore) {
		t.Fatalf("events %v after the migration; want %v", eventsAfter, eventsBefore)
	}
	for i := range eventsBefore {
		if eventsAfter[i] != eventsBefore[i] {
			t.Errorf("event %d is %+v after the migration; want %+v", i, eventsAfter[i], eventsBefore[i])
		}
	}
	r, err := st.SetPaused(ctx, first, true)
	if err != nil {
		t.Fatal(err)
	}
	es, err := st.EventsAfter(ctx, sequence, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Seq != sequence+1 || es[0].Message != "paused" || !r.Paused {
		t.Errorf("events after %d once paused: %+v; want the control event numbered %d, after the pruned one", sequence, es, sequence+1)
	}
}
