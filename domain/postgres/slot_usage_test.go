package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// slot_host_usage and slot_owner_usage stay what slot_reservations adds up to through any
// writer's statements: multi-row inserts, updates that move reservations between hosts and
// owners or change their slots, updates that change nothing, and deletes, also within one
// transaction. Usage rows that fall to zero are removed.
func TestSlotUsageFollowsEveryStatementOnReservations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := migratedState(ctx, t)
	id := func(i int) string { return fmt.Sprintf("00000000-0000-0000-0000-%012d", i) }
	statements := []string{
		`INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
		 SELECT CASE WHEN i % 5 = 0 THEN 'other' ELSE 'pool' END, ('00000000-0000-0000-0000-' || lpad(i::text, 12, '0'))::uuid,
		        'owner-' || i % 3, 'host-' || i % 4, 1 + i % 2
		   FROM generate_series(1, 40) AS i`,
		`UPDATE slot_reservations SET host = 'host-9' WHERE host = 'host-1'`,
		`UPDATE slot_reservations SET owner = 'owner-7' WHERE owner = 'owner-2' AND host <> 'host-0'`,
		`UPDATE slot_reservations SET slots = slots + 2 WHERE host = 'host-2'`,
		`UPDATE slot_reservations SET slots = slots WHERE host = 'host-3'`,
		`UPDATE slot_reservations SET host = 'host-0', owner = 'owner-0', slots = 3 WHERE resource_id = '` + id(7) + `'`,
		`DELETE FROM slot_reservations WHERE host = 'host-9'`,
		`BEGIN; INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots) VALUES ('pool', '` + id(99) + `', 'owner-5', 'host-5', 4);
		 UPDATE slot_reservations SET slots = 1 WHERE resource_id = '` + id(99) + `'; DELETE FROM slot_reservations WHERE owner = 'owner-0'; COMMIT`,
		`UPDATE slot_reservations SET slots = 1 WHERE false`,
		`INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots) SELECT 'pool', gen_random_uuid(), 'owner-1', 'host-1', 1 WHERE false`,
		// New reservations and moved ones in one statement, as the agent's group writes them.
		`INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
		 SELECT 'pool', ('00000000-0000-0000-0000-' || lpad(i::text, 12, '0'))::uuid, 'owner-' || i % 2, 'host-' || i % 3, 2
		   FROM generate_series(30, 60) AS i
		 ON CONFLICT (provisioner, resource_id) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host, slots = EXCLUDED.slots`,
		`DELETE FROM slot_reservations WHERE provisioner = 'other'`,
	}
	for _, sql := range statements {
		if _, err := st.pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var wrong int
		err := st.pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM (
			          (SELECT provisioner, host, slots FROM slot_host_usage
			           EXCEPT SELECT provisioner, host, sum(slots) FROM slot_reservations GROUP BY 1, 2)
			          UNION ALL
			          (SELECT provisioner, host, sum(slots) FROM slot_reservations GROUP BY 1, 2
			           EXCEPT SELECT provisioner, host, slots FROM slot_host_usage)) AS h)
			     + (SELECT count(*) FROM (
			          (SELECT provisioner, owner, host, resources FROM slot_owner_usage
			           EXCEPT SELECT provisioner, owner, host, count(*) FROM slot_reservations GROUP BY 1, 2, 3)
			          UNION ALL
			          (SELECT provisioner, owner, host, count(*) FROM slot_reservations GROUP BY 1, 2, 3
			           EXCEPT SELECT provisioner, owner, host, resources FROM slot_owner_usage)) AS o)`).Scan(&wrong)
		if err != nil {
			t.Fatal(err)
		}
		if wrong != 0 {
			t.Fatalf("after %s: %d usage rows differ from what slot_reservations adds up to", sql, wrong)
		}
	}
	var left int
	if err := st.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM slot_host_usage WHERE provisioner = 'other') + (SELECT count(*) FROM slot_owner_usage WHERE provisioner = 'other')`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d usage rows of a provisioner with no reservations left; want none", left)
	}
}
