package sqlite

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
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

// 0014 builds resources and resource_events once more, without the CHECK constraints on
// resources.type, resources.status and resource_events.kind: every other part of the schema
// stays exactly as it was (the statements SQLite keeps of every table, index and trigger),
// the rows, rowids and the events' sequence are kept, and the three columns then take any
// name.
func TestNamesMigrationDropsOnlyTheThreeChecks(t *testing.T) {
	ctx, st := migratedTo(t, 13)
	db := st.DB()
	const id = "00000000-0000-4000-8000-000000000001"
	for _, stmt := range []string{
		`INSERT INTO resources (id, type, name, args, labels) VALUES ('` + id + `', 'clickhouse', 'kept', '{}', '{"team": "data"}')`,
		`INSERT INTO resource_events (resource_id, kind, status, message) VALUES ('` + id + `', 'status', 'pending', 'pruned')`,
		`DELETE FROM resource_events WHERE message = 'pruned'`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	schema := func() map[string]string {
		t.Helper()
		rows, err := db.QueryContext(ctx, `SELECT type || ' ' || name || ' on ' || tbl_name, coalesce(sql, '') FROM sqlite_master`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var name, sql string
			if err := rows.Scan(&name, &sql); err != nil {
				t.Fatal(err)
			}
			out[name] = sql
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	triggerOrder := func() []string {
		t.Helper()
		rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'resources' ORDER BY rowid`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		return names
	}
	state := func() (rowid, seq int64, events int) {
		t.Helper()
		if err := db.QueryRowContext(ctx, `SELECT (SELECT rowid FROM resources WHERE id = $1), (SELECT seq FROM sqlite_sequence WHERE name = 'resource_events'),
		    (SELECT count(*) FROM resource_events)`, id).Scan(&rowid, &seq, &events); err != nil {
			t.Fatal(err)
		}
		return rowid, seq, events
	}
	before, triggersBefore := schema(), triggerOrder()
	rowid, seq, events := state()

	if err := st.migrateTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	after := schema()
	want := maps.Clone(before)
	for key, check := range map[string]string{
		"table resources on resources": `
                        CONSTRAINT resources_type_check CHECK (type IN ('runtime', 'clickhouse'))`,
		"table resource_events on resource_events": `
                CONSTRAINT resource_events_kind_check CHECK (kind IN ('status', 'error', 'repair', 'health', 'control'))`,
	} {
		if !strings.Contains(want[key], check) {
			t.Fatalf("%s before 0014 has no %q:\n%s", key, check, want[key])
		}
		want[key] = strings.Replace(want[key], check, "", 1)
	}
	const statusCheck = `
                        CONSTRAINT resources_status_check
                        CHECK (status IN ('pending', 'provisioning', 'ready', 'unhealthy', 'error', 'deleting', 'hibernating', 'hibernated'))`
	if !strings.Contains(want["table resources on resources"], statusCheck) {
		t.Fatalf("resources before 0014 has no status check:\n%s", want["table resources on resources"])
	}
	want["table resources on resources"] = strings.Replace(want["table resources on resources"], statusCheck, "", 1)
	for key := range maps.Keys(want) {
		if after[key] != want[key] {
			t.Errorf("%s after 0014:\n%s\nwant:\n%s", key, after[key], want[key])
		}
	}
	for key := range maps.Keys(after) {
		if _, ok := want[key]; !ok {
			t.Errorf("0014 left %s behind", key)
		}
	}
	if got := triggerOrder(); !slices.Equal(got, triggersBefore) {
		t.Errorf("triggers in the order %v after 0014; want %v", got, triggersBefore)
	}
	if r2, s2, e2 := state(); r2 != rowid || s2 != seq || e2 != events {
		t.Errorf("rowid, event sequence, events = %d, %d, %d after 0014; want %d, %d, %d", r2, s2, e2, rowid, seq, events)
	}
	// The store reads every column of the latest schema.
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := st.GetResource(ctx, id)
	if err != nil || r.Type != domain.ResourceTypeClickHouse || r.Labels["team"] != "data" {
		t.Errorf("resource after 0014: %+v, %v", r, err)
	}
	for _, stmt := range []string{
		`INSERT INTO resources (type, name) VALUES ('widget', 'new-type')`,
		`UPDATE resources SET status = 'archived' WHERE id = '` + id + `'`,
		`INSERT INTO resource_events (resource_id, kind, status) VALUES ('` + id + `', 'note', 'pending')`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Errorf("%s after 0014: %v", stmt, err)
		}
	}
}
