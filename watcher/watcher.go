package watcher

import "github.com/juju/worker/v4"

// Owned is a resource id and its owner ("" for the default owner, and for a resource whose
// row is gone by the time the watcher reads it).
type Owned struct {
	ID, Owner string
}

// OwnedWatcher reports batches of owned ids. The first batch is the first of the ids the
// watcher starts from (possibly empty); later batches hold ids that changed since they were
// last received. A batch never repeats an id.
type OwnedWatcher interface {
	worker.Worker
	Changes() <-chan []Owned
}
