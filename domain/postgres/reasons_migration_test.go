package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/statetest"
)

// 0015 fills reason and waiting_since of the rows a build from before reasons wrote, from
// their status and message, and changes nothing else of them: their triggers do not run for
// the backfill (updated_at stays, no event is recorded).
func TestReasonsMigrationBackfillsFromTheMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := migratedStateAt(ctx, t, 14)
	updated := time.Date(2026, 1, 2, 4, 5, 6, 789000, time.UTC)
	changed := map[string]time.Time{}
	for i, c := range statetest.BackfillCases {
		name := fmt.Sprintf("row-%d", i)
		changed[name] = updated.Add(-time.Duration(i+1) * time.Minute)
		if _, err := st.pool.Exec(ctx, `
			INSERT INTO resources (type, name, status, status_message, created_at, updated_at, status_changed_at)
			VALUES ('runtime', $1, $2, $3, $4, $4, $5)`, name, string(c.Status), c.Message, updated, changed[name]); err != nil {
			t.Fatal(err)
		}
	}
	var events int64
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM resource_events`).Scan(&events); err != nil {
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
	var after int64
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM resource_events`).Scan(&after); err != nil || after != events {
		t.Errorf("the migration recorded %d events (%v); want none", after-events, err)
	}
}
