package postgres

import (
	"fmt"
	"testing"
)

// The cache is guessed on only by a group that runs alone and after a group committed the
// usage; each stale guess doubles the groups that read the usage first, up to
// maxGuessPause, and each right guess halves them again.
func TestUsageCacheGuessesOnlyWhenItPays(t *testing.T) {
	var u usageCache
	if _, ok := u.take([]string{"alice"}, true); ok {
		t.Fatal("an empty cache was guessed on")
	}
	u.learn(map[string]int{"h1": 3}, []string{"alice"}, map[ownerHost]int{{"alice", "h1"}: 2}, false)
	if _, ok := u.take([]string{"alice"}, false); ok {
		t.Error("a group running beside another guessed")
	}
	got, ok := u.take([]string{"alice", "bob"}, true)
	if !ok || got.used["h1"] != 3 || got.owned[ownerHost{"alice", "h1"}] != 2 || len(got.owned) != 1 {
		t.Fatalf("take = %+v, %v; want h1's 3 slots and alice's 2 resources there, bob none", got, ok)
	}
	got.used["h1"] = 100
	if again, _ := u.take(nil, true); again.used["h1"] != 3 {
		t.Error("a group's picks changed the cache")
	}

	// reads counts the groups that read the usage first before the next guess: the stale
	// group's own second run, then the pause.
	reads := func() int {
		n := 0
		for {
			if _, ok := u.take(nil, true); ok {
				return n
			}
			n++
			u.learn(map[string]int{}, nil, nil, false)
		}
	}
	for i, want := range []int{2, 3, 5, 9, 17, 33, 1 + maxGuessPause, 1 + maxGuessPause} {
		u.missed()
		if got := reads(); got != want {
			t.Errorf("after %d stale guesses in a row, %d groups read the usage; want %d", i+1, got, want)
		}
	}
	u.learn(map[string]int{}, nil, nil, true)
	u.missed()
	if got := reads(); got != 1+maxGuessPause/2 {
		t.Errorf("after a right guess and a stale one, %d groups read the usage; want %d", got, 1+maxGuessPause/2)
	}
	for range 6 {
		u.learn(map[string]int{}, nil, nil, true)
	}
	u.missed()
	if got := reads(); got != 2 {
		t.Errorf("after as many right guesses as stale ones and then a stale one, %d groups read the usage; want 2", got)
	}
	u.forget()
	if _, ok := u.take(nil, true); ok {
		t.Error("a forgotten cache was guessed on")
	}
}

// Past maxCachedOwners, the cache forgets every owner and learns them again.
func TestUsageCacheBoundsItsOwners(t *testing.T) {
	var u usageCache
	for i := range maxCachedOwners + 1 {
		owner := fmt.Sprintf("owner-%d", i)
		u.learn(map[string]int{}, []string{owner}, map[ownerHost]int{{owner, "h1"}: 1}, true)
	}
	if len(u.owned) != 1 {
		t.Errorf("the cache holds %d owners after %d, want only the last", len(u.owned), maxCachedOwners+1)
	}
}
