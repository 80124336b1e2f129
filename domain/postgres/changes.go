package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// changesChannel is the NOTIFY channel the change-log trigger announces entries on.
const changesChannel = "berth_resource_changes"

// LatestChangeSeq returns the highest sequence number in the change log (0 when empty).
func (s *State) LatestChangeSeq(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.changeLog.QueryRow(ctx, backend.LatestChangeSQL).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read latest change: %w", err)
	}
	return seq, nil
}

// ChangesAfter returns up to limit entries with Seq > after, in Seq order (limit <= 0: all),
// each with its resource's owner (backend.ChangeOwnerSQL).
func (s *State) ChangesAfter(ctx context.Context, after int64, limit int) ([]domain.Change, error) {
	var limitArg *int
	if limit > 0 {
		limitArg = &limit
	}
	if s.changed.want() {
		return s.changesWithRows(ctx, after, limitArg)
	}
	out, err := s.changes(ctx, "read changes after "+fmt.Sprint(after), changesAfterSQL, after, limitArg)
	if err == nil {
		s.changed.keep(nil, after, len(out))
	}
	return out, err
}

// changesAfterSQL reads up to $2 change-log entries after $1 (nil: all), in Seq order.
const changesAfterSQL = `SELECT c.seq, c.resource_id::text, ` + backend.ChangeOwnerSQL + ` FROM change_log c
		  WHERE c.seq > $1 ORDER BY c.seq LIMIT $2`

// ChangesIn returns the entries among seqs that are committed now, in Seq order.
func (s *State) ChangesIn(ctx context.Context, seqs []int64) ([]domain.Change, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	return s.changes(ctx, "read changes by sequence", changesInSQL, seqs)
}

// changesInSQL reads the change-log entries among the seqs $1, in Seq order.
const changesInSQL = `SELECT c.seq, c.resource_id::text, ` + backend.ChangeOwnerSQL + ` FROM change_log c
		  WHERE c.seq = ANY($1) ORDER BY c.seq`

func (s *State) changes(ctx context.Context, what, query string, args ...any) ([]domain.Change, error) {
	rows, err := s.changeLog.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scanChange)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// NewestChanges returns the newest up to limit entries after after, in Seq order, each
// marked OwnerFirst when no entry of its owner lies between cursor and the oldest of them
// within reach (backend.NewestChangesSQL).
func (s *State) NewestChanges(ctx context.Context, cursor, after int64, limit, reach int) ([]domain.NewestChange, error) {
	rows, err := s.changeLog.Query(ctx, newestChangesSQL, cursor, after, limit, reach)
	if err != nil {
		return nil, fmt.Errorf("read the newest changes after %d: %w", after, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.NewestChange, error) {
		var c domain.NewestChange
		err := row.Scan(&c.Seq, &c.ResourceID, &c.Owner, &c.OwnerFirst)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the newest changes after %d: %w", after, err)
	}
	return out, nil
}

var newestChangesSQL = fmt.Sprintf(backend.NewestChangesSQL, "t.resource_id::text")

// scanChange scans a change-log entry: its seq, resource id and owner.
func scanChange(row pgx.CollectableRow) (domain.Change, error) {
	var c domain.Change
	err := row.Scan(&c.Seq, &c.ResourceID, &c.Owner)
	return c, err
}

// PruneChanges deletes, while term holds, the entries written more than olderThan ago.
func (s *State) PruneChanges(ctx context.Context, term domain.Term, olderThan time.Duration) (int64, error) {
	return s.prune(ctx, term, backend.PrunableChanges, olderThan)
}

// ListenChanges takes a connection out of the pool for good and LISTENs on it.
func (s *State) ListenChanges(ctx context.Context) (domain.ChangeListener, error) {
	return s.listen(ctx, changesChannel, "listen for changes")
}

// listen takes a connection out of the pool for good and LISTENs on it on channel; what
// says what for, in errors.
func (s *State) listen(ctx context.Context, channel, what string) (domain.ChangeListener, error) {
	conn, err := s.listeningConn(ctx, what, "LISTEN "+channel)
	if err != nil {
		return nil, err
	}
	return &listener{conn: conn}, nil
}

// listeningConn takes a connection out of the pool for good and runs the LISTEN statements
// on it; what says what for, in errors.
func (s *State) listeningConn(ctx context.Context, what string, statements ...string) (*pgx.Conn, error) {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	conn := pooled.Hijack()
	for _, stmt := range statements {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			closeConn(conn)
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return conn, nil
}

// errListenerClosed is what Wait returns once the listener is closed.
var errListenerClosed = errors.New("change listener closed")

// listener owns one connection LISTENing on one channel (changesChannel or eventsChannel).
// Close may be called while a Wait is in progress: it interrupts the Wait, then closes the
// connection.
type listener struct {
	connMu sync.Mutex // serialises use of conn
	conn   *pgx.Conn

	mu         sync.Mutex // guards closed and cancelWait
	closed     bool
	cancelWait context.CancelFunc
}

// Wait blocks until a notification arrives (nil), ctx ends, or the connection breaks.
func (l *listener) Wait(ctx context.Context) error {
	_, err := l.wait(ctx)
	return err
}

// wait blocks until a notification arrives, ctx ends, or the connection breaks.
func (l *listener) wait(ctx context.Context) (*pgconn.Notification, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errListenerClosed
	}
	l.cancelWait = cancel
	l.mu.Unlock()

	l.connMu.Lock()
	defer l.connMu.Unlock()
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		if l.isClosed() {
			return nil, errListenerClosed
		}
		return nil, fmt.Errorf("wait for changes: %w", err)
	}
	return n, nil
}

// Close interrupts any Wait and closes the connection.
func (l *listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	if l.cancelWait != nil {
		l.cancelWait()
	}
	l.mu.Unlock()

	l.connMu.Lock()
	defer l.connMu.Unlock()
	closeConn(l.conn)
	return nil
}

func (l *listener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// closeTimeout bounds the goodbye to the server when a connection is closed.
const closeTimeout = 5 * time.Second

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}
