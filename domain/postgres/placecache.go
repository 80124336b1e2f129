package postgres

import (
	"maps"
	"sync"
)

// maxCachedOwners bounds the owners whose placements usageCache keeps: past it, it forgets
// them all and learns them again, so that a provisioner with many owners does not grow it
// without end.
const maxCachedOwners = 4096

// maxGuessPause bounds how many groups in a row read the usage first after guesses on it
// kept being stale.
const maxGuessPause = 64

// usageCache is the usage of one provisioner's hosts as the last of its one-transaction
// groups on this agent committed it: the slots reserved on each host, and how many of each
// owner's resources each host holds. A group that runs alone picks its hosts on it before
// its transaction begins, so that it need not read the usage while its rows are locked: on
// an idle agent that read was a fifth of the time from a resource's insert to its ready
// record. A pick on the cache is only a guess: the group checks each one against the usage
// as committed (instantWarmOn), and writes nothing unless every guess is what that usage
// gives and its host still has room when written. So what the cache holds never changes where
// a resource goes or overfills a host; a stale guess costs the group a second transaction,
// and each stale guess doubles the groups that read the usage first before the next guess
// (up to maxGuessPause) where a right one halves them, so that agents that keep changing the
// usage under each other's guesses soon guess rarely. A right guess used to end the
// doubling: three agents on one pool then guessed on a quarter to a third of their groups,
// six guesses in ten were stale, and their rolled-back work was a seventh of the server's
// time in a burst; halving, it was a fourteenth.
type usageCache struct {
	mu    sync.Mutex
	used  map[string]int            // host -> slots reserved
	owned map[string]map[string]int // owner -> host -> resources
	// known says the usage is worth guessing on: a group has committed it, and this agent
	// has not changed it since by any other way.
	known bool
	// pause is how many more groups read the usage first; stale is how many more guesses
	// were stale than right, since the last time as many were right.
	pause, stale int
}

// take returns the usage for a group of owners' resources to guess on, and false when the
// group must read it first: it does not run alone, or the cache is not known or pauses. An
// owner the cache does not know is guessed to have no resources.
func (u *usageCache) take(owners []string, alone bool) (groupUsage, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !alone || !u.known {
		return groupUsage{}, false
	}
	if u.pause > 0 {
		u.pause--
		return groupUsage{}, false
	}
	out := groupUsage{used: maps.Clone(u.used), owned: make(map[ownerHost]int)}
	for _, owner := range owners {
		for host, n := range u.owned[owner] {
			out.owned[ownerHost{owner, host}] = n
		}
	}
	return out, true
}

// learn records what a group committed: used, the slots reserved on each host with the
// group's reservations, and owned, how many of each of owners' resources each host holds
// with the group's. guessed says the group guessed its hosts right.
func (u *usageCache) learn(used map[string]int, owners []string, owned map[ownerHost]int, guessed bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.owned == nil || len(u.owned)+len(owners) > maxCachedOwners {
		u.owned = make(map[string]map[string]int)
	}
	u.used = used
	for _, owner := range owners {
		u.owned[owner] = make(map[string]int)
	}
	for key, n := range owned {
		if hosts, ok := u.owned[key.owner]; ok {
			hosts[key.host] = n
		}
	}
	u.known = true
	if guessed {
		u.stale = max(u.stale-1, 0)
	}
}

// missed records a stale guess: the next groups read the usage first, twice as many as
// after the stale guess before, less halving for each right guess since.
func (u *usageCache) missed() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.known = false
	u.pause = min(1<<u.stale, maxGuessPause)
	if u.pause < maxGuessPause {
		u.stale++
	}
}

// forget makes the next group read the usage first: this agent changed it outside a
// one-transaction group (a release, or a reservation the usual way), or a group that
// guessed failed.
func (u *usageCache) forget() {
	u.mu.Lock()
	u.known = false
	u.mu.Unlock()
}
