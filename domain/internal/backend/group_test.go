package backend_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain/internal/backend"
	"github.com/berth-dev/berth/internal/testkit"
)

// call is one call of the tests' groups.
type call struct{ v int }

// gatedGroup runs groups of at most max calls, recording each group's values; the first
// group waits for release, so that the calls made meanwhile queue up. entered is closed once
// the first group runs.
func gatedGroup(max int) (g *backend.Group[*call], groups func() [][]int, entered <-chan struct{}, release func()) {
	var (
		mu   sync.Mutex
		runs [][]int
		once sync.Once
	)
	gate, in := make(chan struct{}), make(chan struct{})
	g = backend.NewGroup(max, func(_ context.Context, calls []*call) {
		once.Do(func() {
			close(in)
			<-gate
		})
		values := make([]int, len(calls))
		for i, c := range calls {
			values[i] = c.v
		}
		mu.Lock()
		runs = append(runs, values)
		mu.Unlock()
	})
	groups = func() [][]int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(runs)
	}
	return g, groups, in, func() { close(gate) }
}

// doAll makes each call on g from its own goroutine.
func doAll(t *testing.T, wg *sync.WaitGroup, g *backend.Group[*call], calls ...*call) {
	for _, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Do(context.Background(), c); err != nil {
				t.Error(err)
			}
		}()
	}
}

// waitQueued waits until n calls wait behind the group in progress. Nothing announces a
// call joining the queue, so this polls.
func waitQueued[C any](t *testing.T, g *backend.Group[C], n int) {
	t.Helper()
	testkit.Eventually(t, func() error {
		if queued := g.Queued(); queued < n {
			return fmt.Errorf("%d calls queued, want %d", queued, n)
		}
		return nil
	})
}

func TestGroupRunsQueuedCallsTogether(t *testing.T) {
	g, groups, entered, release := gatedGroup(3)
	var wg sync.WaitGroup
	// The first call leads and holds its group open; five more queue behind it.
	doAll(t, &wg, g, &call{v: 0})
	<-entered
	doAll(t, &wg, g, &call{v: 1}, &call{v: 2}, &call{v: 3}, &call{v: 4}, &call{v: 5})
	waitQueued(t, g, 5)
	release()
	wg.Wait()
	got := groups()
	if len(got) != 3 || len(got[0]) != 1 || len(got[1]) != 3 || len(got[2]) != 2 {
		t.Fatalf("groups %v; want the first call alone, then the five queued in groups of at most 3", got)
	}
	var all []int
	for _, group := range got {
		all = append(all, group...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int{0, 1, 2, 3, 4, 5}) {
		t.Errorf("calls run %v; want each once", all)
	}
}

func TestGroupDropsACallWhoseCallerGaveUp(t *testing.T) {
	g, groups, entered, release := gatedGroup(10)
	var wg sync.WaitGroup
	doAll(t, &wg, g, &call{v: 0})
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- g.Do(ctx, &call{v: 1}) }()
	waitQueued(t, g, 1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned call: %v, want context.Canceled", err)
	}
	doAll(t, &wg, g, &call{v: 2})
	waitQueued(t, g, 2)
	release()
	wg.Wait()
	if got := groups(); !slices.EqualFunc(got, [][]int{{0}, {2}}, slices.Equal) {
		t.Errorf("groups %v; want [[0] [2]]: the abandoned call never runs", got)
	}
	if err := g.Do(ctx, &call{v: 3}); !errors.Is(err, context.Canceled) {
		t.Errorf("a call with an ended context: %v, want context.Canceled", err)
	}
}

// endedCtx ends (its Err says so) without closing its Done channel, so that a caller waiting
// in Do sees the lead handed to it before it sees its context end.
type endedCtx struct {
	context.Context
	ended atomic.Bool
}

func (c *endedCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// A caller handed the lead after its context ended drops its own call and says so, rather
// than waiting for a call that will never run.
func TestGroupLeadHandedToACallerWhoseContextEnded(t *testing.T) {
	g, groups, entered, release := gatedGroup(10)
	var wg sync.WaitGroup
	doAll(t, &wg, g, &call{v: 0})
	<-entered
	ctx := &endedCtx{Context: context.Background()}
	result := make(chan error, 1)
	go func() { result <- g.Do(ctx, &call{v: 1}) }()
	waitQueued(t, g, 1)
	ctx.ended.Store(true)
	release()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the call whose context ended: %v, want context.Canceled", err)
		}
	case <-time.After(testkit.LongWait):
		t.Fatal("the caller handed the lead after its context ended never returned")
	}
	wg.Wait()
	if got := groups(); !slices.EqualFunc(got, [][]int{{0}}, slices.Equal) {
		t.Errorf("groups %v; want [[0]]: the dropped call never runs", got)
	}
}
