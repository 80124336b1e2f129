package inflight_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/juju/worker/v4/catacomb"

	"github.com/berth-dev/berth/internal/inflight"
)

// loopWorker is a catacomb worker whose loop starts one goroutine that runs until the
// catacomb's context ends, then returns stop's error.
type loopWorker struct {
	catacomb catacomb.Catacomb
	started  chan struct{}
	stop     chan error
	ended    atomic.Bool // the goroutine has ended
}

func startLoop(t *testing.T) *loopWorker {
	t.Helper()
	w := &loopWorker{started: make(chan struct{}), stop: make(chan error)}
	err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: func() error {
		return inflight.Run(&w.catacomb, func(running *sync.WaitGroup) error {
			ctx := w.catacomb.Context(context.Background())
			running.Add(1)
			go func() {
				defer running.Done()
				close(w.started)
				<-ctx.Done()
				w.ended.Store(true)
			}()
			<-w.started
			return <-w.stop
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestRunEndsTheGoroutinesAndReturnsTheLoopsError(t *testing.T) {
	w := startLoop(t)
	failure := errors.New("watcher stopped")
	w.stop <- failure
	if err := w.catacomb.Wait(); !errors.Is(err, failure) {
		t.Fatalf("Wait: %v, want %v", err, failure)
	}
	if !w.ended.Load() {
		t.Fatal("the worker stopped before the goroutine it started ended")
	}
}

func TestRunAfterAKillWaitsForTheGoroutines(t *testing.T) {
	w := startLoop(t)
	w.catacomb.Kill(nil)
	w.stop <- w.catacomb.ErrDying()
	if err := w.catacomb.Wait(); err != nil {
		t.Fatalf("Wait after Kill: %v", err)
	}
	if !w.ended.Load() {
		t.Fatal("the worker stopped before the goroutine it started ended")
	}
}
