package statetest

import (
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// rowCount counts table's rows directly.
func rowCount(t *testing.T, b *Backend, table string) int {
	t.Helper()
	var n int
	if err := b.QueryRow(testContext(t), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// testStaleLeadersWritesChangeNothing takes the leadership as a, lets c take it over, and
// checks that a's leader-only writes then change nothing (a resumed former leader's round)
// while c's apply.
func testStaleLeadersWritesChangeNothing(t *testing.T, b *Backend) {
	ctx := testContext(t)
	a := leaderTerm(t, b, "a")
	mustCreate(t, b, runtime("pruned"))
	old := time.Now().Add(-2 * time.Hour)
	mustExec(t, b, `UPDATE change_log SET created_at = $1`, old)
	mustExec(t, b, `UPDATE resource_events SET at = $1`, old)
	sample := domain.CapacitySample{At: old, Provisioner: "pool", Unit: "slots", Total: 4, Used: 1}
	if err := b.RecordCapacity(ctx, a, []domain.CapacitySample{sample}); err != nil {
		t.Fatalf("record capacity as the leader: %v", err)
	}

	setHeartbeatAgo(t, b, "a", time.Hour)
	c := leaderTerm(t, b, "c")
	// a comes back: it heartbeats again, but c leads now.
	mustExec(t, b, `UPDATE agents SET heartbeat_at = $1 WHERE id = 'a'`, time.Now())
	before := map[string]int{}
	for _, table := range []string{"change_log", "resource_events", "capacity_samples", "capacity_warnings"} {
		before[table] = rowCount(t, b, table)
	}
	stale := map[string]func() error{
		"PruneChanges": func() error { _, err := b.PruneChanges(ctx, a, time.Hour); return err },
		"PruneEvents":  func() error { _, err := b.PruneEvents(ctx, a, time.Hour); return err },
		"PruneCapacitySamples": func() error {
			_, err := b.PruneCapacitySamples(ctx, a, time.Hour)
			return err
		},
		"RecordCapacity": func() error {
			later := sample
			later.At = time.Now()
			return b.RecordCapacity(ctx, a, []domain.CapacitySample{later})
		},
		"SetCapacityWarning": func() error {
			_, err := b.SetCapacityWarning(ctx, a, domain.CapacityWarning{Provisioner: "pool", Kind: "total", Active: true, Message: "stale", Since: time.Now()})
			return err
		},
	}
	for name, write := range stale {
		if err := write(); !errors.Is(err, domain.ErrNotLeader) {
			t.Errorf("%s by the former leader: err = %v; want ErrNotLeader", name, err)
		}
	}
	for table, n := range before {
		if got := rowCount(t, b, table); got != n {
			t.Errorf("the former leader's writes changed %s: %d rows, want %d", table, got, n)
		}
	}

	for name, prune := range map[string]func(domain.Term, time.Duration) (int64, error){
		"PruneChanges":         func(term domain.Term, d time.Duration) (int64, error) { return b.PruneChanges(ctx, term, d) },
		"PruneEvents":          func(term domain.Term, d time.Duration) (int64, error) { return b.PruneEvents(ctx, term, d) },
		"PruneCapacitySamples": func(term domain.Term, d time.Duration) (int64, error) { return b.PruneCapacitySamples(ctx, term, d) },
	} {
		if n, err := prune(c, time.Hour); err != nil || n != 1 {
			t.Errorf("%s by the leader = %d, %v; want the one old row", name, n, err)
		}
	}
	if _, err := b.SetCapacityWarning(ctx, c, domain.CapacityWarning{Provisioner: "pool", Kind: "total", Active: true, Message: "new", Since: time.Now()}); err != nil {
		t.Errorf("SetCapacityWarning by the leader: %v", err)
	}

	// A term ends with its resignation, and with its lease.
	if err := b.ResignLeadership(ctx, c.Holder, c.Session); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PruneChanges(ctx, c, time.Hour); !errors.Is(err, domain.ErrNotLeader) {
		t.Errorf("prune by a leader that resigned: err = %v; want ErrNotLeader", err)
	}
	c = leaderTerm(t, b, "c")
	mustExec(t, b, `UPDATE leadership SET expires_at = $1`, time.Now().Add(-time.Second))
	if _, err := b.PruneChanges(ctx, c, time.Hour); !errors.Is(err, domain.ErrNotLeader) {
		t.Errorf("prune under an expired lease: err = %v; want ErrNotLeader", err)
	}
	if _, err := b.PruneChanges(ctx, domain.Term{Holder: "c"}, time.Hour); err == nil || errors.Is(err, domain.ErrNotLeader) {
		t.Errorf("prune under a term without a session: err = %v; want it refused as bad input", err)
	}
}

// testPrunesGoByTheDatabaseClock prunes by age: what counts as old is decided on the
// database clock, whatever the caller's clock says.
func testPrunesGoByTheDatabaseClock(t *testing.T, b *Backend) {
	ctx := testContext(t)
	term := leaderTerm(t, b, "leader")
	for _, name := range []string{"a", "b", "c"} {
		mustCreate(t, b, runtime(name))
	}
	// Written 3 minutes, 1 minute and just now on the test's clock, the database's.
	mustExec(t, b, `UPDATE change_log SET created_at = $1 WHERE seq = (SELECT min(seq) FROM change_log)`, time.Now().Add(-3*time.Minute))
	mustExec(t, b, `UPDATE change_log SET created_at = $1 WHERE seq = (SELECT min(seq) + 1 FROM change_log)`, time.Now().Add(-time.Minute))
	n, err := b.PruneChanges(ctx, term, 2*time.Minute)
	if err != nil || n != 1 {
		t.Fatalf("prune changes older than 2 minutes = %d, %v; want the one 3 minutes old", n, err)
	}
	if left := rowCount(t, b, "change_log"); left != 2 {
		t.Errorf("%d changes left; want 2", left)
	}
}
