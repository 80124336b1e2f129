package watcher

import (
	"context"
	"fmt"

	"github.com/berth-dev/berth/domain"
)

// Reads of the log's newest entries (see the package doc): at most newestLimit entries
// each, only while the cursor is at most newestReach entries behind them, and none while
// maxQueuedAhead entries they queued wait for the cursor.
const (
	newestLimit    = 64
	newestReach    = 10_000
	maxQueuedAhead = 4096
)

// announcedBuffer is how many announced entries the listener passes to the loop before it
// passes hints instead: a burst of single-row inserts is then read from the log, in pages.
const announcedBuffer = 256

// readNewest queues the log's newest entries whose owners have none between the cursor
// and them, ahead of the cursor: an owner whose change lands behind another's backlog is
// served without waiting for the pages of the backlog to be read. Each entry is looked at
// once; the entries it queues are remembered until the cursor reaches them.
func (w *resourcesWatcher) readNewest(ctx context.Context) error {
	if len(w.aheadQueued) >= maxQueuedAhead {
		return nil
	}
	w.mu.Lock()
	cursor := w.cursor
	w.mu.Unlock()
	after := max(cursor, w.newestRead)
	newest, err := w.config.Source.NewestChanges(ctx, cursor, after, newestLimit, newestReach)
	if err != nil {
		return fmt.Errorf("read the change log's newest entries after entry %d: %w", after, err)
	}
	first := make([]domain.Change, 0, len(newest))
	for _, change := range newest {
		w.newestRead = max(w.newestRead, change.Seq)
		if change.OwnerFirst {
			first = append(first, change.Change)
		}
	}
	ids, owners := changedIDs(first)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, change := range first {
		w.aheadQueued[change.Seq] = true
	}
	w.addPendingLocked(ids, owners)
	return nil
}

// queueAnnounced queues an entry the listener heard announced ahead of the cursor, unless a
// read reached it first: it is one more entry queued ahead, as readNewest's are, and past
// maxQueuedAhead of them it is left to the reads.
func (w *resourcesWatcher) queueAnnounced(change domain.Change) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if change.Seq <= w.cursor || w.aheadQueued[change.Seq] || len(w.aheadQueued) >= maxQueuedAhead {
		return
	}
	w.aheadQueued[change.Seq] = true
	w.addPendingLocked([]string{change.ResourceID}, map[string]string{change.ResourceID: change.Owner})
}

// takeAnnounced queues the announced entries the listener has passed on, without waiting
// for any, and reports whether there were some.
func (w *resourcesWatcher) takeAnnounced() bool {
	took := false
	for {
		select {
		case change := <-w.announced:
			w.queueAnnounced(change)
			took = true
		default:
			return took
		}
	}
}

// skipQueuedAheadLocked returns changes without the entries queued ahead already (by
// readNewest or announced), which it forgets: the cursor has reached them. Once the cursor
// is not behind, every entry queued ahead is at or below it: each was committed before it
// was queued, so the read after it saw it.
func (w *resourcesWatcher) skipQueuedAheadLocked(changes []domain.Change) []domain.Change {
	kept := changes[:0:0]
	for _, change := range changes {
		if w.aheadQueued[change.Seq] {
			delete(w.aheadQueued, change.Seq)
			continue
		}
		kept = append(kept, change)
	}
	if !w.logBehind {
		clear(w.aheadQueued)
	}
	return kept
}
