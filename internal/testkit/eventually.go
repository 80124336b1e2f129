// Package testkit holds helpers shared by the tests of several packages.
package testkit

import (
	"fmt"
	"time"
)

// Fataler is the part of *testing.T and *check.C that Eventually needs.
type Fataler interface {
	Fatalf(format string, args ...any)
}

// LongWait is how long, in real time, Eventually waits for a condition before it fails the
// test. It bounds a wait for another goroutine to act; it is no timing target.
const LongWait = 10 * time.Second

// pollInterval is how long Eventually waits between tries.
const pollInterval = time.Millisecond

// Eventually is for a test waiting on something another goroutine does without saying when
// it has. It calls cond until cond returns nil, a bounded number of times spread over
// LongWait of real time, and fails the test with cond's last error when it never does.
func Eventually(f Fataler, cond func() error) {
	Within(f, LongWait, cond)
}

// Within is Eventually with its own real-time bound.
func Within(f Fataler, wait time.Duration, cond func() error) {
	tries := max(1, int(wait/pollInterval))
	deadline := time.Now().Add(wait)
	var err error
	for try := 1; ; try++ {
		if err = cond(); err == nil {
			return
		}
		if try >= tries || !time.Now().Before(deadline) {
			f.Fatalf("%v (still so after %d tries over %s)", err, try, wait)
			return
		}
		time.Sleep(pollInterval)
	}
}

// Holds is a condition for Eventually from a predicate; what says what the test waits for.
func Holds(what string, pred func() bool) func() error {
	return func() error {
		if pred() {
			return nil
		}
		return fmt.Errorf("timed out waiting for %s", what)
	}
}
