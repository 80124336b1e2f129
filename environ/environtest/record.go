package environtest

import (
	"context"
	"time"

	"github.com/berth-dev/berth/internal/testkit"
)

// callBuffer is how many calls a Calls keeps, and how many releases a Gate, before the
// fake that adds one more waits for the test to take one.
const callBuffer = 1000

// Calls is the log of the calls a fake received, in order, for a test to take one at a time
// as they come: a fake function Adds what the test wants to see of each call (an id, the
// clock's time when it came, ...).
type Calls[T any] struct {
	ch chan T
}

// NewCalls returns an empty log.
func NewCalls[T any]() *Calls[T] {
	return &Calls[T]{ch: make(chan T, callBuffer)}
}

// Add logs one call.
func (c *Calls[T]) Add(call T) {
	c.ch <- call
}

// Next returns the next call, waiting for it up to testkit.LongWait before it fails the test.
func (c *Calls[T]) Next(f testkit.Fataler) T {
	select {
	case call := <-c.ch:
		return call
	case <-time.After(testkit.LongWait):
		f.Fatalf("timed out waiting for a call")
		var zero T
		return zero
	}
}

// TryNext returns the next call if one has come, without waiting.
func (c *Calls[T]) TryNext() (T, bool) {
	select {
	case call := <-c.ch:
		return call, true
	default:
		var zero T
		return zero, false
	}
}

// None fails the test if a call comes within wait.
func (c *Calls[T]) None(f testkit.Fataler, wait time.Duration) {
	select {
	case call := <-c.ch:
		f.Fatalf("unexpected call %+v", call)
	case <-time.After(wait):
	}
}

// Gate holds the calls of a fake that Wait on it until the test lets them through, one per
// Open or Release.
type Gate struct {
	handoff chan struct{} // Open: taken only by a call waiting at that moment
	tokens  chan struct{} // Release: kept until a call waits
}

// NewGate returns a gate that holds every call.
func NewGate() *Gate {
	return &Gate{handoff: make(chan struct{}), tokens: make(chan struct{}, callBuffer)}
}

// Wait blocks until Open or Release lets the call through, or returns ctx's error when ctx
// ends first.
func (g *Gate) Wait(ctx context.Context) error {
	select {
	case <-g.handoff:
		return nil
	case <-g.tokens:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Open lets one waiting call through. It fails the test when no call is waiting, nor starts
// to within testkit.LongWait.
func (g *Gate) Open(f testkit.Fataler) {
	select {
	case g.handoff <- struct{}{}:
	case <-time.After(testkit.LongWait):
		f.Fatalf("timed out opening the gate: no call waiting")
	}
}

// Release lets one call through: one waiting now, or else the next to wait.
func (g *Gate) Release() {
	g.tokens <- struct{}{}
}
