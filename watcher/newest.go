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

// skipQueuedAheadLocked returns changes without the entries readNewest queued already,
// which it forgets: the cursor has reached them. Once the cursor is not behind, every entry
// queued ahead is at or below it.
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
