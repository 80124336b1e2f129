package rendezvous_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/berth-dev/berth/internal/rendezvous"
)

// keys are n ids shaped like Berth's resource ids (UUIDs).
func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i*7919, i)
	}
	return out
}

func assign(nodes, keys []string) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = rendezvous.Owner(nodes, k)
	}
	return out
}

func TestOwnerIsOneOfTheNodesAndSharesEvenly(t *testing.T) {
	for _, nodes := range [][]string{{"agent-one", "agent-two"}, {"agent-one", "agent-two", "agent-three"}} {
		const n = 3000
		counts := map[string]int{}
		for _, owner := range assign(nodes, keys(n)) {
			if !slices.Contains(nodes, owner) {
				t.Fatalf("owner %q is not one of %v", owner, nodes)
			}
			counts[owner]++
		}
		// Binomial: for 3000 keys the shares are within a few percent of n/len(nodes); a
		// quarter either way fails only for a hash that does not mix.
		fair := n / len(nodes)
		for _, node := range nodes {
			if c := counts[node]; c < fair*3/4 || c > fair*5/4 {
				t.Errorf("%v: %s owns %d of %d keys, want about %d", nodes, node, c, n, fair)
			}
		}
	}
}

func TestOwnerDoesNotDependOnTheNodesOrder(t *testing.T) {
	ordered := []string{"a", "b", "c", "d"}
	shuffled := []string{"c", "a", "d", "b"}
	for _, k := range keys(500) {
		if x, y := rendezvous.Owner(ordered, k), rendezvous.Owner(shuffled, k); x != y {
			t.Fatalf("key %s: owner %s for %v but %s for %v", k, x, ordered, y, shuffled)
		}
	}
}

// Weights are fixed: these owners were computed once and must never change, or agents of
// different builds sharing a store would disagree on who checks what.
func TestOwnerIsStableAcrossProcesses(t *testing.T) {
	nodes := []string{"agent-one", "agent-two", "agent-three"}
	got := []string{}
	for _, k := range keys(8) {
		got = append(got, rendezvous.Owner(nodes, k))
	}
	want := []string{"agent-one", "agent-two", "agent-two", "agent-three", "agent-two", "agent-one", "agent-one", "agent-three"}
	if !slices.Equal(got, want) {
		t.Fatalf("owners %q, want %q", got, want)
	}
}

// Only the keys of a node that leaves move, and only to the others; only keys won by a node
// that joins move, and only to it.
func TestOnlyTheKeysOfTheNodeThatLeavesOrJoinsMove(t *testing.T) {
	all := keys(3000)
	three := assign([]string{"a", "b", "c"}, all)
	two := assign([]string{"a", "b"}, all)
	four := assign([]string{"a", "b", "c", "d"}, all)
	movedToD := 0
	for _, k := range all {
		if three[k] != "c" && two[k] != three[k] {
			t.Errorf("c left: key %s moved from %s to %s", k, three[k], two[k])
		}
		if four[k] != three[k] {
			if four[k] != "d" {
				t.Errorf("d joined: key %s moved from %s to %s", k, three[k], four[k])
			}
			movedToD++
		}
	}
	if movedToD == 0 {
		t.Error("d joined and won no key")
	}
}

func TestOwnerOfNoNodesIsEmpty(t *testing.T) {
	if got := rendezvous.Owner(nil, "k"); got != "" {
		t.Fatalf("Owner(nil) = %q", got)
	}
	if got := rendezvous.Owner([]string{"solo"}, "k"); got != "solo" {
		t.Fatalf("Owner([solo]) = %q", got)
	}
}
