package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
	"github.com/berth-dev/berth/internal/testkit"
)

// otherWriter opens the file of s as another program would, and begins a write transaction
// that holds the database's write lock until the returned commit is called.
func otherWriter(t *testing.T, s *State) (commit func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+s.path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO names (name) VALUES ('other')`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// withLockWaiter makes the group commits of s wait for the write lock with lock, and
// returns a channel that receives each wait between two tries.
func withLockWaiter(s *State, timeout time.Duration, sleep func(ctx context.Context, d time.Duration) error) <-chan time.Duration {
	waits := make(chan time.Duration, 1000)
	lock := writeLockWaiter{timeout: timeout, sleep: func(ctx context.Context, d time.Duration) error {
		waits <- d
		return sleep(ctx, d)
	}}
	s.group = backend.NewGroup(maxGroup, (&committer{db: s.write, lock: lock}).commit)
	return waits
}

// nextWait returns the next wait between two tries; a write that never waits fails the test
// rather than hanging it.
func nextWait(t *testing.T, waits <-chan time.Duration) time.Duration {
	t.Helper()
	select {
	case d := <-waits:
		return d
	case <-time.After(testkit.LongWait):
		t.Fatal("the write never waited to try for the write lock again")
		return 0
	}
}

// busyTimeoutOf returns the busy timeout of the connection the group commits write on.
func busyTimeoutOf(t *testing.T, s *State) int {
	t.Helper()
	var ms int
	if err := s.write.QueryRow(`PRAGMA busy_timeout`).Scan(&ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// A write that meets another program's write lock tries again, on the waiter's schedule,
// until that program commits; the connection keeps its busy timeout for the writes made
// outside a group.
func TestGroupCommitWaitsForAnotherProgramsWriteLock(t *testing.T) {
	s := groupState(t)
	waits := withLockWaiter(s, busyTimeout, sleepFor)
	commitOther := otherWriter(t, s)

	done := make(chan error, 1)
	go func() { done <- s.inTx(context.Background(), insertName("mine")) }()
	var schedule []time.Duration
	for len(schedule) < 3 {
		schedule = append(schedule, nextWait(t, waits))
	}
	if want := writeLockRetries[:3]; !slices.Equal(schedule, want) {
		t.Errorf("waits between tries %v, want %v", schedule, want)
	}
	select {
	case err := <-done:
		t.Fatalf("the write returned (%v) while another program held the write lock", err)
	default:
	}
	commitOther()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, s), []string{"mine", "other"}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if got := busyTimeoutOf(t, s); got != int(busyTimeout.Milliseconds()) {
		t.Errorf("busy timeout after the group %d ms, want %d", got, busyTimeout.Milliseconds())
	}
}

// A write that waited out the timeout gets SQLite's busy error, as with SQLite's own busy
// handler, and writes nothing.
func TestGroupCommitGivesUpOnTheWriteLockAfterTheTimeout(t *testing.T) {
	s := groupState(t)
	const timeout = 20 * time.Millisecond
	waits := withLockWaiter(s, timeout, func(context.Context, time.Duration) error { return nil })
	commitOther := otherWriter(t, s)

	err := s.inTx(context.Background(), insertName("mine"))
	if errorCode(err)&0xff != sqlite3lib.SQLITE_BUSY {
		t.Fatalf("write: %v, want SQLite's busy error", err)
	}
	var waited time.Duration
	for len(waits) > 0 {
		waited += <-waits
	}
	if waited > timeout || waited < timeout-writeLockRetries[len(writeLockRetries)-1] {
		t.Errorf("waited %s in all, want the last try within %s of the timeout %s", waited, writeLockRetries[len(writeLockRetries)-1], timeout)
	}
	commitOther()
	if got, want := names(t, s), []string{"other"}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if got := busyTimeoutOf(t, s); got != int(busyTimeout.Milliseconds()) {
		t.Errorf("busy timeout after the group %d ms, want %d", got, busyTimeout.Milliseconds())
	}
}

// A write whose caller gives up while it waits for the write lock stops waiting, with the
// caller's error.
func TestGroupCommitStopsWaitingForTheWriteLockWhenItsCallerGivesUp(t *testing.T) {
	s := groupState(t)
	waits := withLockWaiter(s, busyTimeout, sleepFor)
	commitOther := otherWriter(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.inTx(ctx, insertName("mine")) }()
	nextWait(t, waits)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("write: %v, want context.Canceled", err)
	}
	commitOther()
	if got, want := names(t, s), []string{"other"}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if got := busyTimeoutOf(t, s); got != int(busyTimeout.Milliseconds()) {
		t.Errorf("busy timeout after the group %d ms, want %d", got, busyTimeout.Milliseconds())
	}
	if err := s.inTx(context.Background(), insertName("after")); err != nil {
		t.Fatalf("a write after the one given up: %v", err)
	}
}

// The agent's own bookkeeping (its heartbeat, the leadership, a budget draw) is written in
// the group commit too, so it waits for another program's write lock on the same schedule
// instead of holding the writing connection through SQLite's busy handler.
func TestBookkeepingWaitsForTheWriteLockAsGroupsDo(t *testing.T) {
	ctx := context.Background()
	s := groupState(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	session, err := s.RegisterAgent(ctx, domain.AgentInfo{ID: "agent-a", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]func() error{
		"heartbeat": func() error { return s.HeartbeatAgent(ctx, "agent-a", session) },
		"leadership": func() error {
			_, claimed, err := s.ClaimLeadership(ctx, "agent-a", session, time.Minute)
			if err == nil && !claimed {
				err = errors.New("the leadership was not claimed")
			}
			return err
		},
		"budget draw": func() error {
			_, err := s.DrawBudget(ctx, domain.BudgetDraw{Provisioner: "kube", Rate: 10, Burst: 10, Want: 1})
			return err
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			waits := withLockWaiter(s, busyTimeout, sleepFor)
			commitOther := otherWriter(t, s)
			done := make(chan error, 1)
			go func() { done <- write() }()
			nextWait(t, waits)
			commitOther()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if _, err := s.write.Exec(`DELETE FROM names`); err != nil {
				t.Fatal(err)
			}
		})
	}
}
