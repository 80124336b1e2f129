package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// planTestConn returns a connection to a newly migrated database for a plan test, which
// ends with the test, and exec, which runs a statement on it or fails the test.
func planTestConn(t *testing.T) (context.Context, *pgxpool.Conn, func(sql string, args ...any)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st := migratedState(ctx, t)
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return ctx, conn, func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// A reservation group's lookups (and GetReservations'), and the room check of the hosts a
// transaction's reservations add to, keep reading by key when their generic
// plan was cached while the tables were nearly empty, as on a new deployment whose tables fill
// faster than autovacuum analyzes them: each call reads the rows it asks for, not every
// reservation of the provisioner.
func TestReservationLookupsReadByKeyWithAPlanMadeOnEmptyTables(t *testing.T) {
	ctx, conn, exec := planTestConn(t)
	exec(`INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
	      VALUES ('pool', '00000000-0000-0000-0000-000000000001', 'owner-1', 'host-1', 1)`)
	exec(`SET plan_cache_mode = force_generic_plan`)
	lookups := []struct {
		name, table, query, args string
	}{
		{"reservations by id", "slot_reservations", reservationsByIDSQL,
			`('pool', ARRAY['00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000002']::uuid[])`},
		{"usage by owner", "slot_owner_usage", ownersUsageSQL, `('pool', ARRAY['owner-1', 'owner-2'])`},
		{"host room", "slot_host_usage", hostRoomSQL,
			`('pool', ARRAY['host-1', 'host-2'], ARRAY[1, 1]::bigint[], ARRAY[100000, 100000]::bigint[])`},
	}
	for i, l := range lookups {
		name := "lookup" + string(rune('a'+i))
		exec(`PREPARE ` + name + ` AS ` + l.query)
		// The first run caches the generic plan, for the nearly empty tables.
		exec(`EXECUTE ` + name + l.args)
	}
	// The tables grow with no analyze in between.
	exec(`INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
	      SELECT 'pool', ('00000000-0000-0000-0000-' || lpad(to_hex(i), 12, '0'))::uuid,
	             'owner-' || i % 2000, 'host-' || i % 10, 1
	        FROM generate_series(2, 20001) AS i`)

	for i, l := range lookups {
		var out string
		name := "lookup" + string(rune('a'+i))
		if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE `+name+l.args).Scan(&out); err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("%s: unreadable plan %s: %v", l.name, out, err)
		}
		var read float64
		var walk func(n planNode)
		walk = func(n planNode) {
			switch n.NodeType {
			case "Seq Scan", "Bitmap Heap Scan":
				t.Errorf("%s: the plan has a %s node on %s; want index lookups by key\n%s", l.name, n.NodeType, n.RelationName, out)
			}
			if n.NodeType != "Function Scan" {
				read += n.ActualRows + n.RowsRemoved
			}
			for _, child := range n.Plans {
				walk(child)
			}
		}
		walk(plans[0].Plan)
		// Two keys: each row found is counted by its scan and the nodes above it.
		if read > 100 {
			t.Errorf("%s: the plan's nodes handled %v rows for two keys; want a handful\n%s", l.name, read, out)
		}
	}
}
