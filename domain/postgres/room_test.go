package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/pgtest"
)

// roomCheck runs hostRoomSQL in tx for hosts that the transaction added added[i] slots to,
// each of slots[i] slots.
func roomCheck(ctx context.Context, tx pgx.Tx, hosts []string, added, slots []int64) error {
	_, err := tx.Exec(ctx, hostRoomSQL, "pool", hosts, added, slots)
	return err
}

// reserveIn writes, in tx, a reservation of n slots on host for a new resource of owner
// bob, as plain SQL would: the trigger adds it to the host's usage.
func reserveIn(ctx context.Context, t *testing.T, tx pgx.Tx, host string, n int) {
	t.Helper()
	if _, err := tx.Exec(ctx, `INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
		VALUES ('pool', gen_random_uuid(), 'bob', $1, $2)`, host, n); err != nil {
		t.Fatal(err)
	}
}

func expectRoomRefused(t *testing.T, what string, err error, message string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "slot_host_room" {
		t.Fatalf("%s: %v; want a check violation of slot_host_room", what, err)
	}
	if message != "" && pgErr.Message != message {
		t.Errorf("%s: the refusal says %q; want %q", what, pgErr.Message, message)
	}
	if !errors.Is(roomRefusal(err), errHostFilled) {
		t.Errorf("%s: roomRefusal(%v) is not errHostFilled", what, err)
	}
}

// threeOnH1 returns a store on a newly migrated database whose host h1 of provisioner pool
// holds 3 slots.
func threeOnH1(t *testing.T) (context.Context, *State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st := migratedState(ctx, t)
	if _, err := st.pool.Exec(ctx, `INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
		VALUES ('pool', gen_random_uuid(), 'alice', 'h1', 3)`); err != nil {
		t.Fatal(err)
	}
	return ctx, st
}

// The room check, run after a transaction's reservations are written, refuses a host that
// now holds more than its slots, naming it, what the others hold and what the transaction
// adds; a host the caller gives no slots for has none; hosts with room pass.
func TestHostRoomRefusesAHostHoldingMoreThanItsSlots(t *testing.T) {
	ctx, st := threeOnH1(t)
	in := func(f func(tx pgx.Tx) error) error {
		tx, err := st.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		return f(tx)
	}

	// h1 has 3 of 4 slots reserved: two more do not fit, whatever h2 has.
	err := in(func(tx pgx.Tx) error {
		reserveIn(ctx, t, tx, "h2", 1)
		reserveIn(ctx, t, tx, "h1", 2)
		return roomCheck(ctx, tx, []string{"h1", "h2"}, []int64{2, 1}, []int64{4, 4})
	})
	expectRoomRefused(t, "two more slots on a host with one free", err, "host h1 of provisioner pool has 3 of its 4 slots reserved: no room for 2 more")
	err = in(func(tx pgx.Tx) error {
		reserveIn(ctx, t, tx, "h3", 1)
		return roomCheck(ctx, tx, []string{"h3"}, []int64{1}, []int64{0})
	})
	expectRoomRefused(t, "a slot on a host of no slots", err, "")
	err = in(func(tx pgx.Tx) error {
		reserveIn(ctx, t, tx, "h2", 1)
		reserveIn(ctx, t, tx, "h1", 1)
		return roomCheck(ctx, tx, []string{"h1", "h2"}, []int64{1, 1}, []int64{4, 4})
	})
	if err != nil {
		t.Errorf("one slot on each of two hosts with room: %v", err)
	}
}

// Two transactions that add to one host at once: the second waits for the first's lock on
// the host's usage row from its write, and its check, made after the first committed, sees
// what the first wrote, so that the two together never hold more than the host's slots.
func TestHostRoomSeesWhatCommittedWhileItWaited(t *testing.T) {
	ctx, st := threeOnH1(t)
	first, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	reserveIn(ctx, t, first, "h1", 1)

	second := make(chan error, 1)
	go func() {
		second <- func() error {
			tx, err := st.pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, `INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots)
				VALUES ('pool', gen_random_uuid(), 'carol', 'h1', 1)`); err != nil {
				return err
			}
			if err := roomCheck(ctx, tx, []string{"h1"}, []int64{1}, []int64{4}); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}()
	}()
	// The second's write waits for the first's lock on h1's usage row.
	waiting := false
	for deadline := time.Now().Add(30 * time.Second); !waiting && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := st.pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%carol%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if !waiting {
		t.Fatal("the second transaction's write never waited for the first's lock on the host's usage")
	}
	if err := roomCheck(ctx, first, []string{"h1"}, []int64{1}, []int64{4}); err != nil {
		t.Fatalf("the first, which fills the host's last slot: %v", err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expectRoomRefused(t, "the second, after the first committed", <-second, "host h1 of provisioner pool has 4 of its 4 slots reserved: no room for 1 more")
	var held int
	if err := st.pool.QueryRow(ctx, `SELECT sum(slots) FROM slot_reservations WHERE host = 'h1'`).Scan(&held); err != nil || held != 4 {
		t.Errorf("h1 holds %d slots (%v); want its 4", held, err)
	}
}

// twoStates returns two stores on one newly migrated database, as two agents have.
func twoStates(ctx context.Context, t *testing.T) (*State, *State) {
	t.Helper()
	dsn := pgtest.New(t)
	var out [2]*State
	for i := range out {
		st, err := Open(ctx, dsn, PoolConfig{})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(st.Close)
		if err := st.Migrate(ctx); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		out[i] = st
	}
	return out[0], out[1]
}

// racingPick picks the first of h1 and h2 with room for req, each of one slot; on its first
// call, before it picks, another agent (other) takes h1's one slot, as another agent's
// reservation committing after this one read the usage would. It counts its calls.
type racingPick struct {
	ctx   context.Context
	t     *testing.T
	other *State
	calls int
}

func (p *racingPick) pick(req domain.SlotRequest, _ *domain.Reservation, usage []domain.HostUsage) (string, error) {
	p.calls++
	if p.calls == 1 {
		onH1 := func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) { return "h1", nil }
		taker := domain.SlotRequest{Provisioner: "pool", ResourceID: uuid.NewString(), Owner: "carol", Slots: 1, HostSlots: oneSlotEach}
		if _, err := p.other.ReserveSlots(p.ctx, taker, onH1); err != nil {
			p.t.Errorf("the other agent's reservation on h1: %v", err)
		}
	}
	used := map[string]int{}
	for _, u := range usage {
		used[u.Host] = u.UsedSlots
	}
	for _, h := range []string{"h1", "h2"} {
		if used[h]+req.Slots <= 1 {
			return h, nil
		}
	}
	return "", fmt.Errorf("no room: %w", domain.ErrNoCapacity)
}

func oneSlotEach(string) int { return 1 }

// expectHeld fails the test unless host h1 and h2 each hold their one slot.
func expectHeld(ctx context.Context, t *testing.T, st *State) {
	t.Helper()
	held, err := st.ReservedByHost(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || held[0].Host != "h1" || held[0].Slots != 1 || held[1].Host != "h2" || held[1].Slots != 1 {
		t.Errorf("the hosts hold %+v; want h1 and h2 one slot each", held)
	}
}

// A reservation whose picked host filled, by another agent's reservation committed after the
// usage was read, is not written there: it is picked again on the usage as committed and goes
// to the host with room.
func TestReservationIsPickedAgainWhenItsHostFillsFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, other := twoStates(ctx, t)
	p := &racingPick{ctx: ctx, t: t, other: other}
	req := domain.SlotRequest{Provisioner: "pool", ResourceID: uuid.NewString(), Owner: "alice", Slots: 1, HostSlots: oneSlotEach}
	res, err := st.ReserveSlots(ctx, req, p.pick)
	if err != nil {
		t.Fatal(err)
	}
	if res.Host != "h2" || p.calls != 2 {
		t.Errorf("reserved on %s after %d picks; want h2 after 2", res.Host, p.calls)
	}
	expectHeld(ctx, t, st)
}

// The same for a one-transaction provision: its group is placed again, and the resource is
// recorded ready on the host with room.
func TestInstantProvisionIsPlacedAgainWhenItsHostFillsFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, other := twoStates(ctx, t)
	var id string
	var gen int64
	if err := st.pool.QueryRow(ctx, `INSERT INTO resources (type, name, owner) VALUES ('runtime', 'r', 'alice')
		RETURNING id::text, generation`).Scan(&id, &gen); err != nil {
		t.Fatal(err)
	}
	var recorded domain.Resource
	in := &domain.InstantProvision{
		Generation: gen, Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}, Units: 1,
		Message: domain.ReadyMessage(gen, ""),
		Ready: func(res domain.Reservation) (domain.ReadyRecord, error) {
			return domain.ReadyRecord{State: map[string]any{"host": res.Host}, Config: map[string]any{}}, nil
		},
		Recorded: &recorded,
	}
	p := &racingPick{ctx: ctx, t: t, other: other}
	req := domain.SlotRequest{Provisioner: "pool", ResourceID: id, Owner: "alice", Slots: 1, Instant: in, HostSlots: oneSlotEach}
	res, err := st.ReserveSlots(ctx, req, p.pick)
	if err != nil {
		t.Fatal(err)
	}
	if res.Host != "h2" || p.calls != 2 || recorded.State["host"] != "h2" || recorded.Status != domain.StatusReady {
		t.Errorf("reserved on %s after %d picks, recorded %s on %v; want ready on h2 after 2 picks", res.Host, p.calls, recorded.Status, recorded.State["host"])
	}
	expectHeld(ctx, t, st)
}

// A pick that keeps choosing a host the request's slots say has no room (a picker and
// HostSlots that disagree) writes nothing: the reservation gives up with the refusal, naming
// the host, after its group's pick and maxRoomTries of its own, and no transaction is left
// open.
func TestReservationGivesUpOnAHostThatNeverHasRoom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := migratedState(ctx, t)
	picks := 0
	onH1 := func(domain.SlotRequest, *domain.Reservation, []domain.HostUsage) (string, error) {
		picks++
		return "h1", nil
	}
	req := domain.SlotRequest{Provisioner: "pool", ResourceID: uuid.NewString(), Owner: "alice", Slots: 1,
		HostSlots: func(string) int { return 0 }}
	_, err := st.ReserveSlots(ctx, req, onH1)
	if !errors.Is(err, errHostFilled) || !strings.Contains(err.Error(), "host h1 of provisioner pool has 0 of its 0 slots reserved: no room for 1 more") {
		t.Errorf("reserve on a host of no slots: %v; want the refusal naming h1", err)
	}
	if picks != 1+maxRoomTries {
		t.Errorf("%d picks; want %d", picks, 1+maxRoomTries)
	}
	if held, err := st.ReservedByHost(ctx, "pool"); err != nil || len(held) != 0 {
		t.Errorf("the pool holds %+v (%v); want nothing", held, err)
	}
	var open int
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&open); err != nil || open != 0 {
		t.Errorf("%d sessions idle in a transaction (%v); want none", open, err)
	}
}

// A transaction's reservations on one host are held to the least room their requests give
// it: each request's room is what its pick left the host.
func TestHostsAddedHoldsAHostToTheLeastRoomGiven(t *testing.T) {
	added := newHostsAdded()
	for _, room := range []int{7, 5, 9} {
		req := domain.SlotRequest{Slots: 1, HostSlots: func(string) int { return room }}
		added.write(req, nil, "h1")
	}
	added.write(domain.SlotRequest{Slots: 2, HostSlots: func(string) int { return 4 }}, &domain.Reservation{Host: "h2", Slots: 2}, "h2")
	if added.added["h1"] != 3 || added.slots["h1"] != 5 {
		t.Errorf("h1: %d added, room %d; want 3 added, room 5", added.added["h1"], added.slots["h1"])
	}
	b := &pgx.Batch{}
	added.queueCheck(b, "pool")
	if b.Len() != 1 || !slices.Equal(b.QueuedQueries[0].Arguments[1].([]string), []string{"h1"}) {
		t.Errorf("the check is queued for %v; want h1 alone (h2 kept its size)", b.QueuedQueries)
	}
}
