package watcher

import "github.com/juju/worker/v4"

// StringsWatcher reports batches of ids. The first batch is the full set the watcher starts
// from (possibly empty); later batches hold the ids that changed since the last one was
// received. A batch never repeats an id.
type StringsWatcher interface {
	worker.Worker
	Changes() <-chan []string
}
