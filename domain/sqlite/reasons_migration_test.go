package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/statetest"
)

// 0015 fills reason and waiting_since of the rows a build from before reasons wrote, from
// their status and message, and changes nothing else of them: the update trigger is held
// while the backfill runs (updated_at stays, no event is recorded), and works again after.
func TestReasonsMigrationBackfillsFromTheMessages(t *testing.T) {
	ctx, st := migratedTo(t, 14)
	db := st.DB()
	updated := time.Date(2026, 1, 2, 4, 5, 6, 789000000, time.UTC)
	changed := map[string]time.Time{}
	for i, c := range statetest.BackfillCases {
		name := fmt.Sprintf("row-%d", i)
		changed[name] = updated.Add(-time.Duration(i+1) * time.Minute)
		if _, err := db.ExecContext(ctx, `
			INSERT INTO resources (type, name, status, status_message, created_at, updated_at, status_changed_at)
			VALUES ('runtime', $1, $2, $3, $4, $4, $5)`, name, string(c.Status), c.Message, FormatTime(updated), FormatTime(changed[name])); err != nil {
			t.Fatal(err)
		}
	}
	eventsBefore, err := st.EventsAfter(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := st.ListResources(ctx, domain.ListFilter{})
	if err != nil || len(rs) != len(statetest.BackfillCases) {
		t.Fatalf("after the migration: %d rows, %v; want %d", len(rs), err, len(statetest.BackfillCases))
	}
	byName := map[string]domain.Resource{}
	for _, r := range rs {
		byName[r.Name] = r
	}
	for i, c := range statetest.BackfillCases {
		name := fmt.Sprintf("row-%d", i)
		r := byName[name]
		statetest.CheckBackfill(t, c, r, changed[name])
		if !r.UpdatedAt.Equal(updated) || r.Status != c.Status || r.StatusMessage != c.Message {
			t.Errorf("%s after the migration: %s %q, updated at %v; want the row as it was", name, r.Status, r.StatusMessage, r.UpdatedAt)
		}
	}
	eventsAfter, err := st.EventsAfter(ctx, 0, 0)
	if err != nil || len(eventsAfter) != len(eventsBefore) {
		t.Fatalf("%d events after the migration (%v); want the %d before", len(eventsAfter), err, len(eventsBefore))
	}

	// The trigger held is back: a change of the message is recorded and moves updated_at.
	row := byName["row-0"]
	if _, err := db.ExecContext(ctx, `UPDATE resources SET status_message = 'noted' WHERE id = $1`, row.ID); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetResource(ctx, row.ID)
	if err != nil || !got.UpdatedAt.After(updated) {
		t.Fatalf("after a write: updated at %v, %v; want it moved by the update trigger", got.UpdatedAt, err)
	}
	if es, err := st.EventsAfter(ctx, 0, 0); err != nil || len(es) != len(eventsBefore)+1 {
		t.Fatalf("after a write: %d events, %v; want one more", len(es), err)
	}

	// The new times are kept in the stored form only, which every read parses.
	for _, column := range []string{"waiting_since", "last_attempt_at"} {
		if _, err := db.ExecContext(ctx, `UPDATE resources SET `+column+` = '2026-01-02 03:04:05' WHERE id = $1`, row.ID); err == nil {
			t.Errorf("%s written as '2026-01-02 03:04:05': no error, want the CHECK to refuse it", column)
		}
		if _, err := db.ExecContext(ctx, `UPDATE resources SET `+column+` = '2026-01-02T03:04:05.000Z' WHERE id = $1`, row.ID); err != nil {
			t.Errorf("%s written in the stored form: %v", column, err)
		}
	}
	if _, err := st.GetResource(ctx, row.ID); err != nil {
		t.Fatalf("read after writing the times: %v", err)
	}
}
