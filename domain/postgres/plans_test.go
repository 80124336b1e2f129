package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/internal/pgtest"
)

// The agent's statements by key keep reading by key when the server cached their generic
// plans while the tables were small and analyzed, as on a deployment that sat quiet, and one
// owner's burst then filled them: until autovacuum analyzes the tables again, up to a
// minute later, those plans stay. Made with sequential scans allowed, the claim, the progress
// record, the reads by id, the changed rows and the heartbeat each scanned the whole table,
// 5,005 rows here, for every call.
func TestKeyedStatementsReadByKeyOnPlansMadeOnAFewAnalyzedRows(t *testing.T) {
	// Each statement with its arguments for the row id and a change-log seq below the newest.
	for _, tc := range []struct {
		name, query string
		args        func(id string, seq int64) []any
	}{
		{"claim", claimSQL, func(id string, _ int64) []any {
			return []any{id, "agent-x", 30.0, "pool", []string{"runtime"}, "provisioning generation ", true, 1000}
		}},
		{"progress", progressSQL, func(id string, _ int64) []any {
			return []any{id, "agent-x", 1, "ready", "ok", "pool", nil, nil, 1, 0, 0, "", false, 1, "ready", "", 1000, "Ready", nil, nil}
		}},
		{"read one", `SELECT ` + resourceColumns + ` FROM resources WHERE id = $1`, func(id string, _ int64) []any { return []any{id} }},
		{"read many", readManySQL, func(id string, _ int64) []any { return []any{[]string{id}} }},
		{"owners", resourceOwnersSQL, func(id string, _ int64) []any { return []any{[]string{id}} }},
		{"unclaimed", unclaimedSQL, func(id string, _ int64) []any { return []any{[]string{id}} }},
		{"changes after", changesAfterSQL, func(_ string, seq int64) []any { return []any{seq, 1000} }},
		{"changed rows", changedRowsSQL, func(_ string, seq int64) []any { return []any{seq, changedRowsBelow, []int64{seq + 1}} }},
		{"changes in", changesInSQL, func(_ string, seq int64) []any { return []any{[]int64{seq + 1}} }},
		{"newest changes", newestChangesSQL, func(_ string, seq int64) []any { return []any{seq, seq, 64, 10000} }},
		{"heartbeat", heartbeatLeasesSQL, func(string, int64) []any { return []any{"agent-x", 1000} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, conn, exec := planTestConn(t)
			exec(`INSERT INTO resources (type, name, owner) SELECT 'runtime', 'quiet-' || i, 'owner-b' FROM generate_series(1, 5) AS i`)
			exec(`VACUUM ANALYZE resources, change_log`)
			exec(`SET plan_cache_mode = force_generic_plan`) // the plan the server may cache after five runs
			exec(`PREPARE s AS ` + tc.query)
			var id string
			var seq int64
			run := func() planNode {
				t.Helper()
				args := tc.args(id, seq)
				params := make([]string, len(args))
				for i := range args {
					params[i] = fmt.Sprintf("$%d", i+1)
				}
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(ctx) }()
				var out string
				err = tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE s(`+strings.Join(params, ", ")+`)`,
					append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...).Scan(&out)
				if err != nil {
					t.Fatal(err)
				}
				var plans []struct{ Plan planNode }
				if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
					t.Fatalf("unreadable plan %s: %v", out, err)
				}
				return plans[0].Plan
			}
			if err := conn.QueryRow(ctx, `SELECT id::text, (SELECT max(seq) FROM change_log) FROM resources LIMIT 1`).Scan(&id, &seq); err != nil {
				t.Fatal(err)
			}
			run() // the plan is made, and cached, on the five rows

			exec(`INSERT INTO resources (type, name, owner) SELECT 'runtime', 'burst-' || i, 'owner-a' FROM generate_series(1, 5000) AS i`)
			if err := conn.QueryRow(ctx, `SELECT id::text, (SELECT max(seq) - 10 FROM change_log) FROM resources WHERE owner = 'owner-a' LIMIT 1`).Scan(&id, &seq); err != nil {
				t.Fatal(err)
			}
			plan := run()
			if read := rowsRead(plan, "resources"); read > 10 {
				t.Errorf("the plan read %v rows of resources for one key, or ten changes; want at most 10\n%+v", read, plan)
			}
			if read := rowsRead(plan, "change_log"); read > 10 {
				t.Errorf("the plan read %v rows of change_log for the ten newest; want at most 10\n%+v", read, plan)
			}
		})
	}
}

// rowsRead is how many rows of table plan's scans read (returned or filtered out, over
// every loop); an update's or delete's own node reads none.
func rowsRead(n planNode, table string) float64 {
	var read float64
	if n.RelationName == table && n.NodeType != "ModifyTable" {
		read = (n.ActualRows + n.RowsRemoved) * n.ActualLoops
	}
	for _, child := range n.Plans {
		read += rowsRead(child, table)
	}
	return read
}

// A State's connections plan by key and compile no plan, unless the URL says otherwise; the
// statements that read a whole table on purpose may scan it.
func TestWholeTableReadsMayScanAndTheURLDecides(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	show := func(st *State, whole bool) string {
		t.Helper()
		const query = `SELECT current_setting('enable_seqscan') || ' ' || current_setting('jit')`
		var got string
		var err error
		if whole {
			err = st.queryWhole(ctx, query, nil, func(rows pgx.Rows) error {
				got, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[string])
				return err
			})
		} else {
			err = st.pool.QueryRow(ctx, query).Scan(&got)
		}
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	url := pgtest.New(t)
	st, err := Open(ctx, url, PoolConfig{MaxConns: 1}) // one connection: the whole-table read's
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, step := range []struct {
		whole bool
		want  string
	}{{false, "off off"}, {true, "on off"}, {false, "off off"}} {
		if got := show(st, step.whole); got != step.want {
			t.Errorf("enable_seqscan and jit = %s (whole-table read %v), want %s", got, step.whole, step.want)
		}
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	chosen, err := Open(ctx, url+sep+"enable_seqscan=on&options=-c%20jit%3Don", PoolConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer chosen.Close()
	if got := show(chosen, false); got != "on on" {
		t.Errorf("enable_seqscan and jit = %s on a pool whose URL sets them on, want on on", got)
	}
}
