package postgres

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A group's ready record, with the generic plan the server caches after a few runs and made
// while the table was nearly empty, updates its rows by key: it reads the rows it is given,
// not the table.
func TestInstantReadyRecordUpdatesByKeyWithAGenericPlan(t *testing.T) {
	ctx, conn, exec := planTestConn(t)
	exec(`SET plan_cache_mode = force_generic_plan`)
	exec(`PREPARE ready AS ` + instantReadyTimesSQL) // as the agent runs it
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
	plan, out := explainReady(ctx, t, tx, ``, ids)
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
	walk(plan)
	if read != 2 {
		t.Errorf("the plan's index scans read %v rows for two keys; want 2\n%s", read, out)
	}
}

// A group's ready record on guessed hosts, which locks its rows itself, reads the rows it is
// given by key whether the server plans it for its parameters or uses the generic plan made
// while the table was nearly empty, even with every row of the table pending (as in a
// burst), which is what the index of rows needing attention holds.
func TestInstantWarmReadyRecordLocksByKey(t *testing.T) {
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		t.Run(mode, func(t *testing.T) {
			ctx, conn, picked := pendingPlanRows(t, mode, "ready", instantWarmReadyTimesSQL, 2)
			ids := []string{picked[0].ID, picked[1].ID}
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			plan, out := explainReady(ctx, t, tx, `, $9::bigint[], $10::text[], $11::text[], 1000`, ids,
				[]int64{1, 1}, []string{picked[0].Owner, picked[1].Owner}, []string{"runtime"})
			// Two rows to lock, and the same two to update.
			if read := rowsRead(plan, "resources"); read > 4 {
				t.Errorf("the plan read %v rows of resources for two keys; want at most 4\n%s", read, out)
			}
			var ready int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM resources WHERE status = 'ready'`).Scan(&ready); err != nil {
				t.Fatal(err)
			}
			if ready != 2 {
				t.Errorf("%d rows ready, want the two given", ready)
			}
		})
	}
}

// A group's lock of its rows, when it reads the usage first, reads the rows it is given by
// key, and locks them in the order given, whether the server plans it for its parameters or
// uses the generic plan made while the table was nearly empty, even with every row of the
// table pending (as in a burst), which is what the index of rows needing attention holds.
func TestInstantLockLocksByKeyInTheOrderGiven(t *testing.T) {
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		t.Run(mode, func(t *testing.T) {
			ctx, conn, picked := pendingPlanRows(t, mode, "lock", instantLockSQL, 3)
			var (
				rows pgx.Rows
				err  error
			)
			// The second is another owner's now: it is not locked.
			ids := []string{picked[0].ID, picked[1].ID, picked[2].ID}
			owners := []string{picked[0].Owner, "someone-else", picked[2].Owner}
			var out string
			err = conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE lock($1::uuid[], $2::bigint[], $3::text[], 'pool', $4::text[], 1000)`,
				pgx.QueryExecModeSimpleProtocol, ids, []int64{1, 1, 1}, owners, []string{"runtime"}).Scan(&out)
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
				if n.RelationName == "resources" {
					read += (n.ActualRows + n.RowsRemoved) * n.ActualLoops
				}
				for _, child := range n.Plans {
					walk(child)
				}
			}
			walk(plans[0].Plan)
			if read > 3 {
				t.Errorf("the plan read %v rows of resources for three keys; want at most 3\n%s", read, out)
			}
			var locked []string
			rows, err = conn.Query(ctx, `EXECUTE lock($1::uuid[], $2::bigint[], $3::text[], 'pool', $4::text[], 1000)`,
				pgx.QueryExecModeSimpleProtocol, ids, []int64{1, 1, 1}, owners, []string{"runtime"})
			if err == nil {
				locked, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			if err != nil || !slices.Equal(locked, []string{ids[0], ids[2]}) {
				t.Errorf("locked %v, %v; want %v, in the order given (the second is another owner's)", locked, err, []string{ids[0], ids[2]})
			}
		})
	}
}

// plannedRow is a row pendingPlanRows read.
type plannedRow struct{ ID, Owner string }

// pendingPlanRows prepares query as name on a connection whose plan_cache_mode is mode, fills
// the table with 5,000 pending rows (analyzed when plans are made for their parameters), and
// returns the first n of them in id order.
func pendingPlanRows(t *testing.T, mode, name, query string, n int) (context.Context, *pgxpool.Conn, []plannedRow) {
	t.Helper()
	ctx, conn, exec := planTestConn(t)
	exec(`SET plan_cache_mode = ` + mode)
	exec(`PREPARE ` + name + ` AS ` + query) // as the agent runs it
	exec(`INSERT INTO resources (type, name, owner) SELECT 'runtime', 'r-' || i, 'owner-' || i % 50 FROM generate_series(1, 5000) AS i`)
	if mode == "force_custom_plan" {
		exec(`ANALYZE resources`)
	}
	rows, err := conn.Query(ctx, `SELECT id::text, owner FROM resources ORDER BY id LIMIT $1`, n)
	if err != nil {
		t.Fatal(err)
	}
	picked, err := pgx.CollectRows(rows, pgx.RowToStructByPos[plannedRow])
	if err != nil || len(picked) != n {
		t.Fatalf("read %d rows: %v, %v", n, picked, err)
	}
	return ctx, conn, picked
}

// explainReady runs the prepared statement "ready", a group's ready record, for the two rows
// ids in tx, with EXPLAIN ANALYZE, and returns its plan and the plan as the server wrote it.
// more are the statement's parameters after the ready record's own ($1 to $8 here; $3 is
// the provisioner "pool"), and extra their placeholders, each with its type.
func explainReady(ctx context.Context, t *testing.T, tx pgx.Tx, extra string, ids []string, more ...any) (planNode, string) {
	t.Helper()
	args := append([]any{pgx.QueryExecModeSimpleProtocol,
		ids, []string{"ready", "ready"}, []string{"{}", "{}"}, []string{"{}", "{}"}, []int64{1, 1},
		[]string{ids[0]}, []string{"provisioning"}, []string{"provisioning generation 1"}}, more...)
	var out string
	err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ready($1::uuid[], $2::text[], 'pool', $3::text[], $4::text[], $5::bigint[], $6::uuid[], $7::text[], $8::text[]`+extra+`)`, args...).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("unreadable plan %s: %v", out, err)
	}
	return plans[0].Plan, out
}

// A group's ready records keep reading by key when the server cached their generic plans
// on the few rows an idle agent had seen and one owner's burst then filled the table,
// unanalyzed: as an agent meets a burst after a quiet start. Planned on a few rows, the
// ready record on guessed hosts looked each row up through the owner's index and filtered
// the owner's whole burst (7,999 rows for each row locked), and updated the rows through a
// scan of the table: a group of 15 took 30 to 85 ms in a burst of 8,000.
func TestInstantReadyRecordsReadByKeyAfterABurstOnAPlanMadeOnFewRows(t *testing.T) {
	for _, tc := range []struct {
		name, query, extra string
		warm               bool
	}{
		{"on guessed hosts", instantWarmReadyTimesSQL, `, $9::bigint[], $10::text[], $11::text[], 1000`, true},
		{"on locked rows", instantReadyTimesSQL, ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, conn, exec := planTestConn(t)
			exec(`PREPARE ready AS ` + tc.query)
			exec(`INSERT INTO resources (type, name, owner) SELECT 'runtime', 'idle-' || i, 'owner-b' FROM generate_series(1, 5) AS i`)
			var idle string
			if err := conn.QueryRow(ctx, `SELECT id::text FROM resources ORDER BY id LIMIT 1`).Scan(&idle); err != nil {
				t.Fatal(err)
			}
			// In a group's transaction, as the agent runs it; the plan is made and cached at
			// the first run, on the five rows.
			runReady := func(ids []string, owner string) (planNode, string) {
				t.Helper()
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(ctx) }()
				if _, err := tx.Exec(ctx, genericPlansSQL); err != nil {
					t.Fatal(err)
				}
				if !tc.warm {
					return explainReady(ctx, t, tx, tc.extra, ids)
				}
				owners, gens := make([]string, len(ids)), make([]int64, len(ids))
				for i := range ids {
					owners[i], gens[i] = owner, 1
				}
				return explainReady(ctx, t, tx, tc.extra, ids, gens, owners, []string{"runtime"})
			}
			runReady([]string{idle, idle}, "owner-b")

			exec(`INSERT INTO resources (type, name, owner) SELECT 'runtime', 'burst-' || i, 'owner-a' FROM generate_series(1, 5000) AS i`)
			rows, err := conn.Query(ctx, `SELECT id::text FROM resources WHERE owner = 'owner-a' ORDER BY id LIMIT 2`)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(ids) != 2 {
				t.Fatalf("read two ids of the burst: %v, %v", ids, err)
			}
			plan, out := runReady(ids, "owner-a")
			// Two rows to lock, and the same two to update.
			if read := rowsRead(plan, "resources"); read > 4 {
				t.Errorf("the plan read %v rows of resources for two keys; want at most 4\n%s", read, out)
			}
		})
	}
}
