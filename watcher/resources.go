package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/juju/clock"
	"github.com/juju/errors"
	"gopkg.in/tomb.v2"

	"github.com/berth-dev/berth/domain"
)

// Listener backoff: how long the watcher waits before listening again after a failure. It
// doubles with each failure in a row and is reset by a wake-up that arrives.
const (
	minListenBackoff = time.Second
	maxListenBackoff = 30 * time.Second
)

// ResourcesSource is what the resources watcher reads (domain.State satisfies it).
type ResourcesSource interface {
	domain.ChangeLog
	// ResourcesNeedingAttention lists a page of the resources needing attention, in id
	// order, after afterID ("": the first page).
	ResourcesNeedingAttention(ctx context.Context, afterID string, limit int) ([]domain.Attention, error)
	// ResourcesOfDeadAgents lists the resources leased by a registered agent that is not
	// live: their leases are void, and no change may ever be logged for them.
	ResourcesOfDeadAgents(ctx context.Context) ([]string, error)
	// OverdueResources lists up to limit unleased resources whose retry is more than
	// overdueFor past: the agent that scheduled the retry let go of them and did not come
	// back (see domain.AgentStore).
	OverdueResources(ctx context.Context, overdueFor time.Duration, limit int) ([]string, error)
}

// ResourcesConfig holds what the resources watcher needs: its dependencies, and its
// ResourcesSettings.
type ResourcesConfig struct {
	Source ResourcesSource
	Clock  clock.Clock
	Logger *slog.Logger

	ResourcesSettings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c ResourcesConfig) Validate() error {
	switch {
	case c.Source == nil:
		return errors.NotValidf("resources watcher: nil Source (pass the agent's store)")
	case c.Clock == nil:
		return errors.NotValidf("resources watcher: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("resources watcher: nil Logger")
	}
	if err := c.ResourcesSettings.Validate(); err != nil {
		return fmt.Errorf("resources watcher: %w", err)
	}
	return nil
}

// resourcesWatcher reports the ids of resources whose desired state changed; see the package
// doc for how it reads the change log.
type resourcesWatcher struct {
	tomb   tomb.Tomb
	config ResourcesConfig
	out    chan []string
	hints  chan struct{}

	// mu guards what Report reads; only the loop goroutine writes the fields below except
	// listening, which the listen goroutine writes.
	mu        sync.Mutex
	cursor    int64
	gaps      map[int64]time.Time // skipped sequence number -> when it was first seen
	pending   []string
	isPending map[string]bool
	listening bool

	// attentionAfter is the last id of the page of resources needing attention read last;
	// attentionRead says every page has been read.
	attentionAfter string
	attentionRead  bool
}

// NewResourcesWatcher starts a resources watcher.
func NewResourcesWatcher(config ResourcesConfig) (StringsWatcher, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	w := &resourcesWatcher{
		config:    config,
		out:       make(chan []string),
		hints:     make(chan struct{}, 1),
		gaps:      make(map[int64]time.Time),
		isPending: make(map[string]bool),
	}
	w.tomb.Go(w.loop)
	return w, nil
}

// Changes returns the channel the batches of ids are sent on.
func (w *resourcesWatcher) Changes() <-chan []string { return w.out }

// Kill asks the watcher to stop.
func (w *resourcesWatcher) Kill() { w.tomb.Kill(nil) }

// Wait waits for the watcher to stop and returns the error that stopped it.
func (w *resourcesWatcher) Wait() error { return w.tomb.Wait() }

// Report shows the cursor, the gaps being watched, how many ids wait for the consumer and
// whether a wake-up listener is open.
func (w *resourcesWatcher) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return map[string]any{
		"cursor":    w.cursor,
		"gaps":      len(w.gaps),
		"pending":   len(w.pending),
		"listening": w.listening,
	}
}

func (w *resourcesWatcher) loop() error {
	ctx := w.tomb.Context(context.Background())
	if err := w.start(ctx); err != nil {
		return w.deathReason(err)
	}
	w.tomb.Go(w.listen)

	poll := w.config.Clock.NewTimer(w.config.PollInterval)
	defer poll.Stop()
	sentFirst := false
	for {
		var out chan []string
		if !sentFirst || len(w.pending) > 0 {
			out = w.out
		}
		select {
		case <-w.tomb.Dying():
			return tomb.ErrDying
		case out <- w.pendingBatch():
			sentFirst = true
			w.clearPending()
			if err := w.readAttention(ctx); err != nil {
				return w.deathReason(err)
			}
		case <-w.hints:
			if err := w.read(ctx); err != nil {
				return w.deathReason(err)
			}
		case <-poll.Chan():
			if err := w.read(ctx); err != nil {
				return w.deathReason(err)
			}
			if err := w.readDeadAgents(ctx); err != nil {
				return w.deathReason(err)
			}
			if err := w.readOverdue(ctx); err != nil {
				return w.deathReason(err)
			}
			poll.Reset(w.config.PollInterval)
		}
	}
}

// start sets the cursor, notes the missing sequence numbers just below it as gaps and queues
// the first page of the resources that need attention as the first event.
func (w *resourcesWatcher) start(ctx context.Context) error {
	cursor, err := w.config.Source.LatestChangeSeq(ctx)
	if err != nil {
		return fmt.Errorf("read the newest change-log entry: %w", err)
	}
	from := max(cursor-int64(w.config.BatchSize), 0)
	recent, err := w.config.Source.ChangesAfter(ctx, from, w.config.BatchSize)
	if err != nil {
		return fmt.Errorf("read the change log after entry %d: %w", from, err)
	}
	now := w.config.Clock.Now()
	next := from + 1
	for _, change := range recent {
		if change.Seq > cursor {
			break
		}
		w.noteGaps(next, change.Seq, now)
		next = change.Seq + 1
	}
	w.noteGaps(next, cursor+1, now)

	w.mu.Lock()
	w.cursor = cursor
	w.mu.Unlock()
	return w.readAttention(ctx)
}

// readAttention queues the next page of the resources needing attention, until every page
// has been read. Pages are read one delivery at a time, so a consumer slower than the
// store holds back the reading instead of the watcher holding every id.
func (w *resourcesWatcher) readAttention(ctx context.Context) error {
	if w.attentionRead {
		return nil
	}
	page, err := w.config.Source.ResourcesNeedingAttention(ctx, w.attentionAfter, w.config.BatchSize)
	if err != nil {
		return fmt.Errorf("list resources needing attention: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range page {
		w.addPendingLocked(a.ID)
	}
	if len(page) < w.config.BatchSize {
		w.attentionRead = true
	} else {
		w.attentionAfter = page[len(page)-1].ID
	}
	return nil
}

// read looks up the gaps again, then reads the log from the cursor until it is exhausted.
func (w *resourcesWatcher) read(ctx context.Context) error {
	now := w.config.Clock.Now()
	if err := w.recheckGaps(ctx, now); err != nil {
		return err
	}
	for {
		w.mu.Lock()
		cursor := w.cursor
		w.mu.Unlock()
		changes, err := w.config.Source.ChangesAfter(ctx, cursor, w.config.BatchSize)
		if err != nil {
			return fmt.Errorf("read the change log after entry %d: %w", cursor, err)
		}
		w.mu.Lock()
		for _, change := range changes {
			w.noteGapsLocked(w.cursor+1, change.Seq, now)
			w.cursor = change.Seq
			w.addPendingLocked(change.ResourceID)
		}
		w.mu.Unlock()
		if len(changes) < w.config.BatchSize {
			return nil
		}
	}
}

// readDeadAgents queues the resources leased by agents that are not live, as if they had
// changed: nothing else would tell this agent to take them over.
func (w *resourcesWatcher) readDeadAgents(ctx context.Context) error {
	ids, err := w.config.Source.ResourcesOfDeadAgents(ctx)
	if err != nil {
		return fmt.Errorf("list resources of dead agents: %w", err)
	}
	w.addLeftBehind(ids, "resources leased by agents that are not live")
	return nil
}

// readOverdue queues up to BatchSize unleased resources whose retry is overdue, as if they
// had changed: the agent that scheduled the retry did not come back for it.
func (w *resourcesWatcher) readOverdue(ctx context.Context) error {
	ids, err := w.config.Source.OverdueResources(ctx, w.config.OverdueAfter, w.config.BatchSize)
	if err != nil {
		return fmt.Errorf("list resources whose retry is overdue: %w", err)
	}
	w.addLeftBehind(ids, "resources whose retry is overdue")
	return nil
}

// addLeftBehind queues ids, which no change would report, logging what they are.
func (w *resourcesWatcher) addLeftBehind(ids []string, what string) {
	if len(ids) == 0 {
		return
	}
	w.config.Logger.Debug(what, "count", len(ids))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		w.addPendingLocked(id)
	}
}

// recheckGaps reports the gaps that have been filled and forgets those older than GapTimeout.
func (w *resourcesWatcher) recheckGaps(ctx context.Context, now time.Time) error {
	w.mu.Lock()
	seqs := make([]int64, 0, len(w.gaps))
	for seq := range w.gaps {
		seqs = append(seqs, seq)
	}
	w.mu.Unlock()
	if len(seqs) == 0 {
		return nil
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	filled, err := w.config.Source.ChangesIn(ctx, seqs)
	if err != nil {
		return fmt.Errorf("look up %d skipped change-log entries: %w", len(seqs), err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, change := range filled {
		delete(w.gaps, change.Seq)
		w.addPendingLocked(change.ResourceID)
	}
	for seq, seen := range w.gaps {
		if now.Sub(seen) >= w.config.GapTimeout {
			delete(w.gaps, seq)
			w.config.Logger.Debug("change-log entry never appeared; taking it as rolled back",
				"seq", seq, "waited", now.Sub(seen))
		}
	}
	return nil
}

// noteGaps remembers the sequence numbers in [from, to) as gaps, keeping only the newest
// BatchSize of a longer run (see the package doc).
func (w *resourcesWatcher) noteGaps(from, to int64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.noteGapsLocked(from, to, now)
}

func (w *resourcesWatcher) noteGapsLocked(from, to int64, now time.Time) {
	from = max(from, to-int64(w.config.BatchSize))
	for seq := from; seq < to; seq++ {
		if _, known := w.gaps[seq]; !known {
			w.gaps[seq] = now
		}
	}
}

func (w *resourcesWatcher) addPendingLocked(id string) {
	if w.isPending[id] {
		return
	}
	w.isPending[id] = true
	w.pending = append(w.pending, id)
}

// pendingBatch returns the pending ids for a send; an empty batch is a non-nil empty slice.
func (w *resourcesWatcher) pendingBatch() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == nil {
		return []string{}
	}
	return w.pending
}

// clearPending forgets the ids just sent; the consumer owns the sent slice from now on.
func (w *resourcesWatcher) clearPending() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = nil
	clear(w.isPending)
}

// listen keeps a wake-up listener open while the watcher lives. Its failures are logged and
// retried with backoff; they never stop the watcher, which polls meanwhile.
func (w *resourcesWatcher) listen() error {
	ctx := w.tomb.Context(context.Background())
	backoff := minListenBackoff
	for {
		err := w.listenOnce(ctx, &backoff)
		if !w.tomb.Alive() {
			return nil
		}
		w.config.Logger.Warn("change-log wake-ups failed; polling until listening again",
			"error", err, "retry_in", backoff)
		select {
		case <-w.tomb.Dying():
			return nil
		case <-w.config.Clock.After(backoff):
		}
		backoff = min(backoff*2, maxListenBackoff)
	}
}

// listenOnce opens a listener, hints a read (entries may have been written while none was
// open) and passes each wake-up on until the listener fails.
func (w *resourcesWatcher) listenOnce(ctx context.Context, backoff *time.Duration) error {
	listener, err := w.config.Source.ListenChanges(ctx)
	if err != nil {
		return fmt.Errorf("listen for change-log wake-ups: %w", err)
	}
	defer func() {
		if err := listener.Close(); err != nil {
			w.config.Logger.Debug("closing change-log listener", "error", err)
		}
	}()
	w.setListening(true)
	defer w.setListening(false)
	w.hint()
	for {
		if err := listener.Wait(ctx); err != nil {
			return fmt.Errorf("wait for change-log wake-ups: %w", err)
		}
		*backoff = minListenBackoff
		w.hint()
	}
}

func (w *resourcesWatcher) setListening(listening bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.listening = listening
}

// hint asks the loop to read; hints that arrive while one is queued coalesce.
func (w *resourcesWatcher) hint() {
	select {
	case w.hints <- struct{}{}:
	default:
	}
}

// deathReason is err, unless the watcher is dying anyway and err is only the cancellation.
func (w *resourcesWatcher) deathReason(err error) error {
	if !w.tomb.Alive() && errors.Is(err, context.Canceled) {
		return tomb.ErrDying
	}
	return fmt.Errorf("resources watcher: %w", err)
}
