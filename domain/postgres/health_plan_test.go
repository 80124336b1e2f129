package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// planNode is the part of an EXPLAIN (FORMAT JSON) node the test reads.
type planNode struct {
	NodeType        string     `json:"Node Type"`
	IndexName       string     `json:"Index Name"`
	RelationName    string     `json:"Relation Name"`
	ActualRows      float64    `json:"Actual Rows"` // per loop
	ActualLoops     float64    `json:"Actual Loops"`
	RowsRemoved     float64    `json:"Rows Removed by Filter"`
	SharedHitBlocks float64    `json:"Shared Hit Blocks"`
	Plans           []planNode `json:"Plans"`
}

// Every checkable page, the first or one deep into the table, with the plan the server makes
// for its parameters or the generic one it caches after a few runs, walks the checkable index
// in id order and stops after the page: a sweep's cost grows with the resources, not with
// their square.
func TestListCheckableWalksTheIndex(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := migratedState(ctx, t)
	// Rows as the provisioner leaves them, enough that the planner's choices are those of a
	// big table. The triggers (history, change log) are beside the point and slow to fill.
	const rows, limit = 100000, 500
	for _, stmt := range []string{
		`ALTER TABLE resources DISABLE TRIGGER USER`,
		fmt.Sprintf(`INSERT INTO resources (type, name, owner, provisioner, args, status, status_message, observed_generation, state, config, ready_at)
			SELECT 'runtime', 'r' || i, 'owner-' || i %% 50, 'pool', '{"slots": 1}', 'ready', 'ready at generation 1', 1,
			       jsonb_build_object('host', 'http://host-' || i %% 100 || '.test:9091', 'slots', 1),
			       jsonb_build_object('host', 'http://host-' || i %% 100 || '.test:9091', 'cpu', 1, 'memory_gb', 4), now()
			  FROM generate_series(1, %d) AS i`, rows),
		`ALTER TABLE resources ENABLE TRIGGER USER`,
		`VACUUM ANALYZE resources`,
	} {
		if _, err := st.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	var deep string
	if err := st.pool.QueryRow(ctx, `SELECT id::text FROM resources ORDER BY resources.id OFFSET $1 LIMIT 1`, rows*3/4).Scan(&deep); err != nil {
		t.Fatal(err)
	}

	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, page := range []struct{ name, query, args string }{
			{"first page", checkableFirstPage, fmt.Sprintf("(%d, 'agent-a', '{agent-c}')", limit)},
			{"deep page", checkableNextPage, fmt.Sprintf("(%d, 'agent-a', '{agent-c}', '%s')", limit, deep)},
		} {
			var out string
			err := func() error {
				if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
					return err
				}
				if _, err := conn.Exec(ctx, `PREPARE checkable AS `+page.query); err != nil {
					return err
				}
				defer conn.Exec(ctx, `DEALLOCATE checkable`)
				return conn.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE checkable`+page.args).Scan(&out)
			}()
			if err != nil {
				t.Fatalf("%s, %s: %v", page.name, mode, err)
			}
			var plans []struct{ Plan planNode }
			if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
				t.Fatalf("%s, %s: unreadable plan %s: %v", page.name, mode, out, err)
			}
			checkWalksIndex(t, page.name+", "+mode, plans[0].Plan, limit)
		}
	}
}

func checkWalksIndex(t *testing.T, what string, root planNode, limit int) {
	t.Helper()
	var scans []planNode
	var walk func(n planNode)
	walk = func(n planNode) {
		switch n.NodeType {
		case "Sort", "Incremental Sort", "Seq Scan", "Bitmap Heap Scan":
			t.Errorf("%s: plan has a %s node; want an ordered walk of the index", what, n.NodeType)
		case "Index Scan":
			scans = append(scans, n)
		}
		for _, child := range n.Plans {
			walk(child)
		}
	}
	walk(root)
	if len(scans) != 1 || scans[0].IndexName != "resources_checkable_idx" {
		t.Fatalf("%s: plan scans %+v; want one index scan of resources_checkable_idx", what, scans)
	}
	if read := scans[0].ActualRows + scans[0].RowsRemoved; read > float64(limit) {
		t.Errorf("%s: the scan read %v rows for a page of %d", what, read, limit)
	}
}
