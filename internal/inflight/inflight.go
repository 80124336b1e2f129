// Package inflight runs a worker's loop that starts goroutines of its own (reconciles or
// checks in flight) and makes the loop their owner: the loop's work ends only after every
// one of them has, so that the worker's Wait covers them.
package inflight

import "sync"

// Killer is the part of a catacomb (or tomb) that Run needs: killing it ends the context
// the goroutines run on.
type Killer interface {
	Kill(err error)
}

// Run calls run with the group on which it starts its goroutines (Add before each, Done as
// each ends). Once run returns, Run kills k with run's error, so that the goroutines' context
// ends, waits for them, and returns run's error. Killing first matters: the goroutines end
// with the context, and waiting before the kill would wait for ever.
func Run(k Killer, run func(running *sync.WaitGroup) error) error {
	var running sync.WaitGroup
	err := run(&running)
	k.Kill(err)
	running.Wait()
	return err
}
