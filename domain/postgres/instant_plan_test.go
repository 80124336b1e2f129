package postgres

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A group's ready record, with the generic plan the server caches after a few runs and made
// while the table was nearly empty, updates its rows by key: it reads the rows it is given,
// not the table.
func TestInstantReadyRecordUpdatesByKeyWithAGenericPlan(t *testing.T) {
	ctx, conn, exec := planTestConn(t)
	exec(`SET plan_cache_mode = force_generic_plan`)
	exec(`PREPARE ready AS ` + instantReadySQL)
	// The table grows with no analyze in between.
	exec(`INSERT INTO resources (type, name, owner) SELECT 'runtime', 'r-' || i, 'owner-' || i % 50 FROM generate_series(1, 5000) AS i`)
	var ids []string
	rows, err := conn.Query(ctx, `SELECT id::text FROM resources ORDER BY id LIMIT 2`)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(ids) != 2 {
		t.Fatalf("read two ids: %v, %v", ids, err)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var out string
	err = tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ready($1::uuid[], $2::text[], 'pool', $3::text[], $4::text[], $5::bigint[], $6::uuid[], $7::text[], $8::text[])`, pgx.QueryExecModeSimpleProtocol,
		ids, []string{"ready", "ready"}, []string{"{}", "{}"}, []string{"{}", "{}"}, []int64{1, 1},
		[]string{ids[0]}, []string{"provisioning"}, []string{"provisioning generation 1"}).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("unreadable plan %s: %v", out, err)
	}
	var read float64
	var walk func(n planNode)
	walk = func(n planNode) {
		switch n.NodeType {
		case "Seq Scan", "Bitmap Heap Scan":
			t.Errorf("the plan has a %s node; want lookups by key", n.NodeType)
		}
		if n.NodeType == "Index Scan" {
			read += (n.ActualRows + n.RowsRemoved) * n.ActualLoops
		}
		for _, child := range n.Plans {
			walk(child)
		}
	}
	walk(plans[0].Plan)
	if read != 2 {
		t.Errorf("the plan's index scans read %v rows for two keys; want 2\n%s", read, out)
	}
}
