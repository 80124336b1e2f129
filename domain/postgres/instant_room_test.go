package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A group's reservations, written under the provisioner's lock, are checked against every
// committed reservation first: a host without room for all the group puts on it fails the
// statement with a check violation naming the host, and nothing is written; a host with
// room, or a host the group does not use, takes them.
func TestCheckedReservationsRefuseAHostWithoutRoom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := migratedState(ctx, t)
	if _, err := st.pool.Exec(ctx, `INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
		VALUES ('pool', gen_random_uuid(), 'alice', 'h1', 3)`); err != nil {
		t.Fatal(err)
	}
	ids := func(n int) []string {
		rows, err := st.pool.Query(ctx, `SELECT gen_random_uuid()::text FROM generate_series(1, $1)`, n)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	write := func(ids, hosts []string, capacities map[string]int64) (int, error) {
		var capHosts []string
		var caps []int64
		for h, c := range capacities {
			capHosts, caps = append(capHosts, h), append(caps, c)
		}
		owners, slots := make([]string, len(ids)), make([]int64, len(ids))
		for i := range ids {
			owners[i], slots[i] = "bob", 1
		}
		rows, err := st.pool.Query(ctx, instantCheckedReservationsSQL, "pool", ids, owners, hosts, slots, capHosts, caps)
		if err != nil {
			return 0, err
		}
		written, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
			res, err := scanReservation(row)
			return res.ResourceID, err
		})
		return len(written), err
	}
	count := func() (n int) {
		if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM slot_reservations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// h1 has 3 of 4 slots reserved: two more do not fit, whatever h2 has.
	_, err := write(ids(3), []string{"h2", "h1", "h1"}, map[string]int64{"h1": 4, "h2": 4})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "slot_host_room" {
		t.Fatalf("two more slots on a host with one free: %v; want a check violation of slot_host_room", err)
	}
	if want := "host h1 of provisioner pool has 3 of its 4 slots reserved: no room for 2 more"; pgErr.Message != want {
		t.Errorf("the refusal says %q; want %q", pgErr.Message, want)
	}
	if n := count(); n != 1 {
		t.Errorf("%d reservations after the refusal; want the one committed before", n)
	}
	// A host the caller gives no slots for has none.
	if _, err := write(ids(1), []string{"h3"}, nil); !errors.As(err, &pgErr) || pgErr.ConstraintName != "slot_host_room" {
		t.Errorf("a slot on a host of no slots: %v; want a check violation of slot_host_room", err)
	}

	if n, err := write(ids(2), []string{"h2", "h1"}, map[string]int64{"h1": 4, "h2": 4}); err != nil || n != 2 {
		t.Errorf("one slot on each of two hosts with room: %d written, %v; want 2", n, err)
	}
	if n := count(); n != 3 {
		t.Errorf("%d reservations; want 3", n)
	}
}
