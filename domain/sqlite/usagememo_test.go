package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// migratedState opens a State on the file at path and migrates it.
func migratedState(t *testing.T, path string) *State {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// provisionOn is a group's one-transaction provision of resource id, of owner, on host with
// slots; seen is told the usage the provision was shown and the usage a read in its place
// gives.
func provisionOn(ctx context.Context, s *State, id, owner, host string, slots int, seen func(shown, read []domain.HostUsage)) *groupWrite {
	return &groupWrite{instant: func(tx *sql.Tx, usage *usageMemo) error {
		req := domain.SlotRequest{Provisioner: "pool", ResourceID: id, Owner: owner, Slots: slots, Instant: &domain.InstantProvision{
			Generation: 1, Provisioner: "pool", Types: []domain.ResourceType{domain.ResourceTypeRuntime}, Units: 1,
			Message: domain.ReadyMessage(1, ""),
			Ready: func(res domain.Reservation) (domain.ReadyRecord, error) {
				return domain.ReadyRecord{State: map[string]any{"host": res.Host}, Config: map[string]any{}}, nil
			},
		}}
		read, err := hostUsage(ctx, tx, req)
		if err != nil {
			return err
		}
		_, _, err = s.reserveInstant(ctx, tx, usage, req, id, func(_ domain.SlotRequest, _ *domain.Reservation, got []domain.HostUsage) (string, error) {
			seen(got, read)
			return host, nil
		})
		return err
	}}
}

// One group's one-transaction provisions are shown the usage a read in their place would
// give: the provisions before them in the group, of any owner, counted; one whose row was
// not untouched, and whose savepoint was rolled back, not counted; and what another write
// of the group released gone.
func TestGroupProvisionsSeeTheUsageAReadWould(t *testing.T) {
	ctx := context.Background()
	s := migratedState(t, filepath.Join(t.TempDir(), "berth.db"))
	create := func(name, owner string) string {
		var id string
		if err := s.write.QueryRow(`INSERT INTO resources (type, name, owner, args) VALUES ('runtime', $1, $2, '{}') RETURNING id`,
			name, owner).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Usage there before the group: one slot of carol's on h1.
	if _, err := s.write.Exec(`INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots) VALUES ('pool', $1, 'carol', 'h1', 1)`,
		create("before", "carol")); err != nil {
		t.Fatal(err)
	}
	paused := create("paused", "alice")
	if _, err := s.write.Exec(`UPDATE resources SET paused = 1 WHERE id = $1`, paused); err != nil {
		t.Fatal(err)
	}
	a1, b1, a2, a3 := create("a1", "alice"), create("b1", "bob"), create("a2", "alice"), create("a3", "alice")

	var shown [][]domain.HostUsage
	provision := func(id, owner, host string, slots int) *groupWrite {
		return provisionOn(ctx, s, id, owner, host, slots, func(got, read []domain.HostUsage) {
			if !reflect.DeepEqual(got, read) {
				t.Errorf("provision of %s was shown %+v, a read gives %+v", id, got, read)
			}
			shown = append(shown, got)
		})
	}
	release := &groupWrite{f: func(tx *sql.Tx) error {
		_, err := tx.Exec(`DELETE FROM slot_reservations WHERE resource_id = $1`, a1)
		return err
	}}
	batch := []*groupWrite{
		provision(a1, "alice", "h2", 2),
		provision(b1, "bob", "h2", 1),
		provision(paused, "alice", "h0", 5),
		provision(a2, "alice", "h0", 1),
		release,
		provision(a3, "alice", "h3", 1),
	}
	(&committer{db: s.write}).commit(ctx, batch)
	for i, w := range batch {
		if want := i == 2; errors.Is(w.err, domain.ErrNotInstant) != want {
			t.Errorf("write %d: err = %v, want ErrNotInstant %v", i, w.err, want)
		}
	}
	want := [][]domain.HostUsage{
		{{Host: "h1", UsedSlots: 1}},
		{{Host: "h1", UsedSlots: 1}, {Host: "h2", UsedSlots: 2}},
		{{Host: "h1", UsedSlots: 1}, {Host: "h2", UsedSlots: 3, OwnerResources: 1}},
		{{Host: "h1", UsedSlots: 1}, {Host: "h2", UsedSlots: 3, OwnerResources: 1}},
		{{Host: "h0", UsedSlots: 1, OwnerResources: 1}, {Host: "h1", UsedSlots: 1}, {Host: "h2", UsedSlots: 1}},
	}
	if !reflect.DeepEqual(shown, want) {
		t.Errorf("usage shown =\n%+v\nwant\n%+v", shown, want)
	}
}

// The usage kept from one group to the next is used only while nothing else wrote the
// file: a write by another connection (another program) or by the writing connection
// outside a group makes the next group read it again, and the lock-only write of
// awaitWriters does not.
func TestGroupsKeepTheUsageOnlyWhileNothingElseWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "berth.db")
	s := migratedState(t, path)
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	n := 0
	createOn := func(db *sql.DB) string {
		n++
		var id string
		if err := db.QueryRow(`INSERT INTO resources (type, name, owner, args) VALUES ('runtime', $1, 'alice', '{}') RETURNING id`,
			fmt.Sprint("r", n)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	var todo []string
	for range 4 {
		todo = append(todo, createOn(s.write))
	}
	c := &committer{db: s.write}
	// provision runs a group of the lock-only write and a provision of the next resource on
	// h1, and returns the usage the provision was shown and the usage a read gave.
	provision := func() (shown, read []domain.HostUsage) {
		id := todo[0]
		todo = todo[1:]
		w := provisionOn(ctx, s, id, "alice", "h1", 1, func(got, r []domain.HostUsage) { shown, read = got, r })
		c.commit(ctx, []*groupWrite{{}, w})
		if w.err != nil {
			t.Fatal(w.err)
		}
		return shown, read
	}
	// marked sets the slots kept for h1 to a value no read gives, so that a group that
	// uses what was kept shows it.
	const marker = 1000
	marked := func() {
		hosts, ok := c.usage.hosts["pool"]
		if !ok {
			t.Fatal("the first group's usage was not kept")
		}
		hosts.slots["h1"] = marker
	}
	// reserve writes a reservation of bob's on host through db.
	reserve := func(db *sql.DB, host string) {
		if _, err := db.Exec(`INSERT INTO slot_reservations (provisioner, resource_id, owner, host, slots) VALUES ('pool', $1, 'bob', $2, 1)`,
			createOn(db), host); err != nil {
			t.Fatal(err)
		}
	}

	provision()
	marked()
	if shown, _ := provision(); len(shown) != 1 || shown[0].UsedSlots != marker {
		t.Errorf("with nothing written between two groups, the second was shown %+v, want the usage kept (h1 %d slots)", shown, marker)
	}

	marked()
	reserve(other, "h2")
	if shown, read := provision(); !reflect.DeepEqual(shown, read) || len(read) != 2 {
		t.Errorf("after another connection's write, the group was shown %+v, a read gives %+v", shown, read)
	}

	marked()
	reserve(s.write, "h3")
	if shown, read := provision(); !reflect.DeepEqual(shown, read) || len(read) != 3 {
		t.Errorf("after a write outside a group, the group was shown %+v, a read gives %+v", shown, read)
	}
}
