package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// LatestChangeSeq returns the highest sequence number in the change log (0 when empty).
func (s *State) LatestChangeSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.read.QueryRowContext(ctx, backend.LatestChangeSQL).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read latest change: %w", err)
	}
	return seq, nil
}

// ChangesAfter returns up to limit entries with Seq > after, in Seq order (limit <= 0: all),
// each with its resource's owner.
func (s *State) ChangesAfter(ctx context.Context, after int64, limit int) ([]domain.Change, error) {
	if limit <= 0 {
		limit = -1 // no limit
	}
	return s.changes(ctx, "read changes after "+strconv.FormatInt(after, 10),
		`SELECT c.seq, c.resource_id, `+backend.ChangeOwnerSQL+` FROM change_log c
		  WHERE c.seq > $1 ORDER BY c.seq LIMIT $2`, after, limit)
}

// NewestChanges returns the newest up to limit entries after after, in Seq order, each
// marked OwnerFirst when no entry of its owner lies between cursor and the oldest of them
// within reach (backend.NewestChangesSQL).
func (s *State) NewestChanges(ctx context.Context, cursor, after int64, limit, reach int) ([]domain.NewestChange, error) {
	what := "read the newest changes after " + strconv.FormatInt(after, 10)
	rows, err := s.read.QueryContext(ctx, newestChangesSQL, cursor, after, limit, reach)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := collectRows(rows, func(row rowScanner) (c domain.NewestChange, err error) {
		err = row.Scan(&c.Seq, &c.ResourceID, &c.Owner, &c.OwnerFirst)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

var newestChangesSQL = fmt.Sprintf(backend.NewestChangesSQL, "t.resource_id")

// ChangesIn returns the entries among seqs that are committed now, in Seq order.
func (s *State) ChangesIn(ctx context.Context, seqs []int64) ([]domain.Change, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	placeholders := make([]string, len(seqs))
	args := make([]any, len(seqs))
	for i, seq := range seqs {
		placeholders[i] = "$" + strconv.Itoa(i+1)
		args[i] = seq
	}
	return s.changes(ctx, "read changes by sequence",
		`SELECT c.seq, c.resource_id, `+backend.ChangeOwnerSQL+` FROM change_log c
		  WHERE c.seq IN (`+strings.Join(placeholders, ", ")+`) ORDER BY c.seq`, args...)
}

func (s *State) changes(ctx context.Context, what, query string, args ...any) ([]domain.Change, error) {
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := collectRows(rows, func(row rowScanner) (c domain.Change, err error) {
		err = row.Scan(&c.Seq, &c.ResourceID, &c.Owner)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// PruneChanges deletes, while term holds, the entries written more than olderThan ago.
func (s *State) PruneChanges(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	return s.prune(ctx, term, backend.PrunableChanges, olderThan)
}

// ListenChanges returns a listener woken by this State's commits and by changes of the
// database's files made by any process (see the package doc). It wakes its caller only when
// the change log has grown since the last wake-up.
func (s *State) ListenChanges(ctx context.Context) (domain.ChangeListener, error) {
	return s.listen(ctx, "listen for changes", s.LatestChangeSeq)
}

// listen returns a listener woken as ListenChanges' is, that wakes its caller only when
// latest, the newest entry of the log it follows, has grown since the last wake-up; what
// says what for, in errors.
func (s *State) listen(ctx context.Context, what string, latest func(context.Context) (int64, error)) (domain.ChangeListener, error) {
	files, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("%s: watch the database's files: %w", what, err)
	}
	// The directory, not the files: the write-ahead log comes and goes.
	if err := files.Add(filepath.Dir(s.path)); err != nil {
		_ = files.Close()
		return nil, fmt.Errorf("%s: watch the directory of %s: %w", what, s.path, err)
	}
	l := &listener{
		state:  s,
		latest: latest,
		files:  files,
		local:  s.wake.subscribe(),
		closed: make(chan struct{}),
	}
	seq, err := latest(ctx)
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	l.seq = seq
	return l, nil
}

// errListenerClosed is what Wait returns once the listener is closed.
var errListenerClosed = errors.New("change listener closed")

// listener turns commits and file changes into wake-ups. Close may be called while a Wait is
// in progress: it interrupts the Wait.
type listener struct {
	state  *State
	latest func(context.Context) (int64, error) // the newest entry of the log followed
	files  *fsnotify.Watcher
	local  chan struct{}

	seq int64 // the log's newest entry at the last wake-up; used by Wait only

	closeOnce sync.Once
	closed    chan struct{}
}

// Wait blocks until the log followed has grown (nil), ctx ends, or the listener fails.
func (l *listener) Wait(ctx context.Context) error {
	for {
		fromFiles, err := l.nextHint(ctx)
		if err != nil {
			return err
		}
		if l.drainHints() {
			fromFiles = true
		}
		grown, err := l.grown(ctx)
		if err == nil && !grown && fromFiles {
			// Another process's write-ahead log frames are on disk before its commit is
			// visible: wait for its commit, then look again.
			if err = l.state.awaitWriters(ctx); err == nil {
				grown, err = l.grown(ctx)
			}
		}
		switch {
		case err != nil && l.isClosed():
			return errListenerClosed
		case err != nil:
			return fmt.Errorf("wait for changes: %w", err)
		case grown:
			return nil
		}
	}
}

// grown reports whether the log followed has grown since the last wake-up.
func (l *listener) grown(ctx context.Context) (bool, error) {
	seq, err := l.latest(ctx)
	if err != nil || seq <= l.seq {
		return false, err
	}
	l.seq = seq
	return true, nil
}

// nextHint waits for a commit of this State (false) or a change of the database's files
// (true).
func (l *listener) nextHint(ctx context.Context) (fromFiles bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-l.closed:
			return false, errListenerClosed
		case <-l.local:
			return false, nil
		case ev, ok := <-l.files.Events:
			if !ok {
				return false, errListenerClosed
			}
			if l.isDatabaseFile(ev.Name) {
				return true, nil
			}
		case err, ok := <-l.files.Errors:
			switch {
			case !ok:
				return false, errListenerClosed
			case errors.Is(err, fsnotify.ErrEventOverflow):
				return true, nil // events were lost: any of them may have been a write
			default:
				return false, fmt.Errorf("wait for changes: watch the database's files: %w", err)
			}
		}
	}
}

// drainHints discards the hints already queued, since one read of the log answers them all,
// and reports whether any was a change of the database's files.
func (l *listener) drainHints() (fromFiles bool) {
	for {
		select {
		case <-l.local:
		case ev, ok := <-l.files.Events:
			if !ok {
				return fromFiles
			}
			fromFiles = fromFiles || l.isDatabaseFile(ev.Name)
		default:
			return fromFiles
		}
	}
}

// awaitWriters returns once the write transaction under way, if any, has ended: it takes the
// database's write lock and lets it go. It does so as an empty write of this State's next
// shared commit (whose transaction takes the lock at BEGIN), not with a transaction of its
// own: this State's own commits change the write-ahead log too, so it is called about once
// per commit, and a transaction of its own would hold the one writing connection between
// every two commits.
func (s *State) awaitWriters(ctx context.Context) error {
	w := &groupWrite{}
	if err := s.group.Do(ctx, w); err != nil {
		return err
	}
	return w.err
}

// isDatabaseFile reports whether name is the database file or its write-ahead log.
func (l *listener) isDatabaseFile(name string) bool {
	return name == l.state.path || name == l.state.path+"-wal"
}

// Close interrupts any Wait and releases the file watch.
func (l *listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.closed)
		l.state.wake.unsubscribe(l.local)
		err = l.files.Close()
	})
	return err
}

func (l *listener) isClosed() bool {
	select {
	case <-l.closed:
		return true
	default:
		return false
	}
}

// broadcaster wakes every subscriber; a subscriber that has not taken its last wake-up yet
// gets no second one (they coalesce).
type broadcaster struct {
	mu   sync.Mutex
	subs map[chan struct{}]bool
}

func newBroadcaster() *broadcaster {
	return &broadcaster{subs: map[chan struct{}]bool{}}
}

func (b *broadcaster) subscribe() chan struct{} {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs[ch] = true
	return ch
}

func (b *broadcaster) unsubscribe(ch chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs, ch)
}

func (b *broadcaster) broadcast() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
