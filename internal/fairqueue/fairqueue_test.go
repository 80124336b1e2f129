package fairqueue_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/berth-dev/berth/internal/fairqueue"
)

func drain(q *fairqueue.Queue) []string {
	var out []string
	for {
		it, ok := q.Pop()
		if !ok {
			return out
		}
		out = append(out, it.Owner+":"+it.ID)
	}
}

func TestOneOwnerIsFirstInFirstOut(t *testing.T) {
	q := fairqueue.New()
	q.SetWeights(map[string]int{"a": 7})
	for i := range 10 {
		q.Push("a", fmt.Sprint(i))
	}
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("a:%d", i))
	}
	if got := drain(q); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if q.Len() != 0 || q.Owners() != 0 {
		t.Fatalf("after draining: %d ids of %d owners", q.Len(), q.Owners())
	}
}

func TestOwnersTakeTurns(t *testing.T) {
	q := fairqueue.New()
	for i := range 4 {
		q.Push("a", fmt.Sprint(i))
	}
	q.Push("b", "0")
	q.Push("c", "0")
	q.Push("b", "1")
	want := []string{"a:0", "b:0", "c:0", "a:1", "b:1", "a:2", "a:3"}
	if got := drain(q); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// A late owner is served within one round however long the other owner's backlog.
func TestALateOwnerIsNotStarved(t *testing.T) {
	q := fairqueue.New()
	for i := range 10000 {
		q.Push("a", fmt.Sprint(i))
	}
	for range 3 {
		q.Pop()
	}
	q.Push("b", "late")
	for i := range 2 {
		it, _ := q.Pop()
		if it.Owner == "b" {
			return
		}
		if i == 1 {
			t.Fatalf("b not served within one round of a")
		}
	}
}

func TestWeightsAreRespectedInProportion(t *testing.T) {
	q := fairqueue.New()
	q.SetWeights(map[string]int{"a": 3, "c": 0})
	for i := range 300 {
		q.Push("a", fmt.Sprint(i))
		q.Push("b", fmt.Sprint(i))
		q.Push("c", fmt.Sprint(i))
	}
	served := map[string]int{}
	for range 250 {
		it, _ := q.Pop()
		served[it.Owner]++
	}
	// a:b:c = 3:1:1 (c's weight 0 counts as 1), within one turn.
	if served["a"] < 148 || served["a"] > 152 || served["b"] < 48 || served["b"] > 52 || served["c"] < 48 || served["c"] > 52 {
		t.Fatalf("served %v of 250, want about a 150, b 50, c 50", served)
	}
}

func TestPeekShowsWhatTakeTakes(t *testing.T) {
	q := fairqueue.New()
	q.SetWeights(map[string]int{"a": 2})
	for i := range 5 {
		q.Push("a", fmt.Sprint(i))
	}
	q.Push("b", "0")
	q.Pop()
	peeked := q.Peek(4)
	var taken []fairqueue.Item
	if n := q.Take(4, func(it fairqueue.Item) { taken = append(taken, it) }); n != 4 {
		t.Fatalf("took %d", n)
	}
	if !slices.Equal(peeked, taken) {
		t.Fatalf("peeked %v, took %v", peeked, taken)
	}
	want := []fairqueue.Item{{"a", "1"}, {"b", "0"}, {"a", "2"}, {"a", "3"}}
	if !slices.Equal(taken, want) {
		t.Fatalf("took %v, want %v", taken, want)
	}
	d := map[string]int{"gone": 5}
	if q.DepthsInto(d); len(d) != 1 || d["a"] != 1 {
		t.Fatalf("depths %v", d)
	}
	if got := q.Peek(10); len(got) != 1 {
		t.Fatalf("peek past the end: %v", got)
	}
}
