package sqlite

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain/internal/backend"
)

// The agent's queries state the predicate of resources_needing_attention_idx word for word,
// and the overdue handoff's query reads through that index.
func TestAttentionQueriesUseTheAttentionIndex(t *testing.T) {
	ctx, st := migratedTo(t, 0)
	var index string
	if err := st.read.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'resources_needing_attention_idx'`).Scan(&index); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(index, "WHERE "+backend.NeedsAttentionSQL) {
		t.Errorf("resources_needing_attention_idx is\n%s\nwant its predicate to be backend.NeedsAttentionSQL:\n%s", index, backend.NeedsAttentionSQL)
	}
	rows, err := st.read.QueryContext(ctx, `EXPLAIN QUERY PLAN `+overdueSQL, secondsAgo(0), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(plan, "\n"), "USING INDEX resources_needing_attention_idx") {
		t.Errorf("overdue query plan:\n%s\nwant it to use resources_needing_attention_idx", strings.Join(plan, "\n"))
	}
}
