package watcher

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/berth-dev/berth/domain"
)

// Listener backoff: how long the watcher waits before listening again after a failure. It
// doubles with each failure in a row and is reset by a wake-up that arrives.
const (
	minListenBackoff = time.Second
	maxListenBackoff = 30 * time.Second
)

// The wake-ups: a listener goroutine of the watcher's tomb keeps a listener open and passes
// what it hears to the loop (see the package doc, "NOTIFY is only a hint" and "Announced
// entries").

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
// open) and passes each wake-up on until the listener fails: an announced entry to the loop
// as it is (when the loop has taken too many already, as a hint), any other as a hint.
func (w *resourcesWatcher) listenOnce(ctx context.Context, backoff *time.Duration) error {
	listener, err := w.openListener(ctx)
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
		change, announced, err := listener.WaitAnnounced(ctx)
		if err != nil {
			return fmt.Errorf("wait for change-log wake-ups: %w", err)
		}
		*backoff = minListenBackoff
		if !announced {
			w.hint()
			continue
		}
		select {
		case w.announced <- change:
			// The loop, woken on this thread, runs first; the listener's next wake-up (the
			// one sent with the announcement) waits its turn (as delivered yields).
			runtime.Gosched()
		default:
			w.hint()
		}
	}
}

// openListener listens for the announced entries when the source has them, and for bare
// wake-ups otherwise.
func (w *resourcesWatcher) openListener(ctx context.Context) (domain.ChangeAnnouncer, error) {
	if source, ok := w.config.Source.(announcingSource); ok {
		return source.ListenAnnouncedChanges(ctx)
	}
	listener, err := w.config.Source.ListenChanges(ctx)
	if err != nil {
		return nil, err
	}
	return unannounced{listener}, nil
}

// unannounced is a listener whose wake-ups announce nothing.
type unannounced struct{ domain.ChangeListener }

func (u unannounced) WaitAnnounced(ctx context.Context) (domain.Change, bool, error) {
	return domain.Change{}, false, u.Wait(ctx)
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
