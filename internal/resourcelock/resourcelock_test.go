package resourcelock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/testkit"
)

func (s *Set) entries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks)
}

func (s *Set) usersOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.locks[id]; ok {
		return l.users
	}
	return 0
}

func TestTryLockFailsWhileHeld(t *testing.T) {
	var s Set
	unlock, ok := s.TryLock("r1")
	if !ok {
		t.Fatal("TryLock of a free id failed")
	}
	if again, ok := s.TryLock("r1"); ok || again != nil {
		t.Fatal("TryLock of a held id succeeded")
	}
	other, ok := s.TryLock("r2")
	if !ok {
		t.Fatal("TryLock of another id failed while r1 is held")
	}
	other()
	unlock()
	unlock() // harmless
	if n := s.entries(); n != 0 {
		t.Fatalf("%d entries left after every lock was given up", n)
	}
	relock, ok := s.TryLock("r1")
	if !ok {
		t.Fatal("TryLock failed after unlock")
	}
	relock()
}

func TestLockWaitsForTheHolder(t *testing.T) {
	var s Set
	unlock, ok := s.TryLock("r1")
	if !ok {
		t.Fatal("TryLock of a free id failed")
	}
	got := make(chan func())
	go func() {
		next, err := s.Lock(context.Background(), "r1")
		if err != nil {
			t.Error(err)
		}
		got <- next
	}()
	waitUsers(t, &s, "r1", 2)
	select {
	case <-got:
		t.Fatal("Lock returned while the lock was held")
	default:
	}
	unlock()
	select {
	case next := <-got:
		if _, ok := s.TryLock("r1"); ok {
			t.Fatal("TryLock succeeded while the waiter holds the lock")
		}
		next()
	case <-time.After(testkit.LongWait):
		t.Fatal("Lock still waiting after the holder gave the lock up")
	}
	if n := s.entries(); n != 0 {
		t.Fatalf("%d entries left after every lock was given up", n)
	}
}

func TestLockGivesUpWhenItsContextEnds(t *testing.T) {
	var s Set
	unlock, _ := s.TryLock("r1")
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error)
	go func() {
		next, err := s.Lock(ctx, "r1")
		if next != nil {
			t.Error("Lock returned an unlock with its error")
		}
		errs <- err
	}()
	waitUsers(t, &s, "r1", 2)
	cancel()
	select {
	case err := <-errs:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock: got %v, want context.Canceled", err)
		}
	case <-time.After(testkit.LongWait):
		t.Fatal("Lock still waiting after its context ended")
	}
	if n := s.usersOf("r1"); n != 1 {
		t.Fatalf("r1 has %d users after the waiter gave up, want 1", n)
	}
	unlock()
	if n := s.entries(); n != 0 {
		t.Fatalf("%d entries left after every lock was given up", n)
	}
	if _, err := s.Lock(ctx, "r2"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with an ended context: got %v, want context.Canceled", err)
	}
	if n := s.entries(); n != 0 {
		t.Fatalf("%d entries left after a Lock with an ended context", n)
	}
}

// Many goroutines lock a few ids, each mixing Lock and TryLock; the race detector and the
// counters catch two holders of one lock, and the set is empty at the end.
func TestManyGoroutines(t *testing.T) {
	const goroutines, rounds, ids = 32, 200, 4
	var s Set
	counters := make([]int, ids) // each guarded by its id's lock only
	inside := make([]int, ids)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				k := (g + i) % ids
				id := fmt.Sprintf("r%d", k)
				var unlock func()
				if i%3 == 0 {
					var ok bool
					if unlock, ok = s.TryLock(id); !ok {
						continue
					}
				} else {
					var err error
					if unlock, err = s.Lock(context.Background(), id); err != nil {
						t.Error(err)
						return
					}
				}
				inside[k]++
				if inside[k] != 1 {
					t.Errorf("%s held by %d at once", id, inside[k])
				}
				counters[k]++
				inside[k]--
				unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range counters {
		total += n
	}
	if locked := goroutines * (rounds - (rounds+2)/3); total < locked {
		t.Errorf("%d lockings, want at least the %d made with Lock", total, locked)
	}
	if n := s.entries(); n != 0 {
		t.Fatalf("%d entries left after every lock was given up", n)
	}
}

func waitUsers(t *testing.T, s *Set, id string, n int) {
	t.Helper()
	testkit.Eventually(t, func() error {
		if have := s.usersOf(id); have != n {
			return fmt.Errorf("%s has %d users, want %d", id, have, n)
		}
		return nil
	})
}
