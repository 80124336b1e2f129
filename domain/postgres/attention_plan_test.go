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
// and the quiet resources' read the few that need attention through the partial index: their
// WHERE implies the index's predicate.
func TestOverdueAndQuietResourcesUseTheAttentionIndex(t *testing.T) {
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
		`INSERT INTO resources (type, name, status, updated_at, paused)
			SELECT 'runtime', 'q' || i, 'pending', now() - interval '1 hour', i % 2 = 0 FROM generate_series(1, 30) AS i`,
		`ALTER TABLE resources ENABLE TRIGGER USER`,
		`VACUUM ANALYZE resources`,
	} {
		if _, err := st.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []struct {
		name string
		sql  string
		list func(ctx context.Context, age time.Duration, limit int) (int, error)
		want int
	}{
		{"overdue", overdueSQL, func(ctx context.Context, age time.Duration, limit int) (int, error) {
			ids, err := st.OverdueResources(ctx, age, limit)
			return len(ids), err
		}, 10},
		{"quiet", quietSQL, func(ctx context.Context, age time.Duration, limit int) (int, error) {
			quiet, err := st.QuietResources(ctx, age, limit)
			return len(quiet), err
		}, 15},
	} {
		var out string
		if err := st.pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+strings.Replace(strings.Replace(q.sql, "$1", "0", 1), "$2", "100", 1)).Scan(&out); err != nil {
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
			t.Errorf("%s query scans indexes %v; want resources_needing_attention_idx: %s", q.name, indexes, out)
		}
		n, err := q.list(ctx, time.Minute, 100)
		if err != nil || n != q.want {
			t.Errorf("%s: %d resources, %v; want the %d not paused", q.name, n, err, q.want)
		}
	}
}
