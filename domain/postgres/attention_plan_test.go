package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain/internal/backend"
)

// The agent's queries state the predicate of resources_needing_attention_idx word for word,
// as the migration that last built it wrote it.
func TestAttentionQueriesStateTheIndexPredicate(t *testing.T) {
	body, err := fs.ReadFile(migrationFiles, "migrations/0011_lifecycle_controls.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "CREATE INDEX resources_needing_attention_idx ON resources (next_attempt_at)\n    WHERE "+backend.NeedsAttentionSQL+";") {
		t.Errorf("0011 does not build resources_needing_attention_idx with backend.NeedsAttentionSQL as its predicate:\n%s", backend.NeedsAttentionSQL)
	}
}

// With a table of resources the agent has nothing to do for, the overdue handoff's query
// reads the few that need attention through the partial index: its WHERE implies the index's
// predicate.
func TestOverdueResourcesUseTheAttentionIndex(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := migratedState(ctx, t)
	for _, stmt := range []string{
		`ALTER TABLE resources DISABLE TRIGGER USER`,
		`INSERT INTO resources (type, name, status, observed_generation, hibernate)
			SELECT 'runtime', 'r' || i, CASE WHEN i % 10 = 0 THEN 'hibernated' ELSE 'ready' END, 1, i % 10 = 0
			  FROM generate_series(1, 50000) AS i`,
		`INSERT INTO resources (type, name, status, next_attempt_at, paused)
			SELECT 'runtime', 'p' || i, 'pending', now() - interval '1 hour', i % 2 = 0 FROM generate_series(1, 20) AS i`,
		`ALTER TABLE resources ENABLE TRIGGER USER`,
		`VACUUM ANALYZE resources`,
	} {
		if _, err := st.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	var out string
	if err := st.pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+strings.Replace(strings.Replace(overdueSQL, "$1", "0", 1), "$2", "100", 1)).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("unreadable plan %s: %v", out, err)
	}
	var indexes []string
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.IndexName != "" {
			indexes = append(indexes, n.IndexName)
		}
		for _, child := range n.Plans {
			walk(child)
		}
	}
	walk(plans[0].Plan)
	if fmt.Sprint(indexes) != "[resources_needing_attention_idx]" {
		t.Errorf("overdue query scans indexes %v; want resources_needing_attention_idx: %s", indexes, out)
	}
	ids, err := st.OverdueResources(ctx, 0, 100)
	if err != nil || len(ids) != 10 {
		t.Errorf("overdue: %d resources, %v; want the 10 not paused", len(ids), err)
	}
}
