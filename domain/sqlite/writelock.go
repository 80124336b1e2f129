package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	sqlite3lib "modernc.org/sqlite/lib"
)

// writeLockRetries is how long the group's transaction waits before each new try for the
// write lock while another process holds it, the last repeated: SQLite's own busy handler
// sleeps 1, 2, 5, 10, 15, 20 and 25 ms between tries, so a wait for a commit that ends 2.1
// ms after the first try ended at 3 ms, and one that ends at 4 ms at 8. Every wake-up for a
// client's write (awaitWriters) is such a wait, as is every write of this process that
// meets another's. A try is a failed lock call, a few microseconds.
var writeLockRetries = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond,
	300 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond,
}

// writeLockWaiter begins the group's write transactions on a connection whose busy timeout
// it lifts while it tries for the write lock, trying again on its own schedule
// (writeLockRetries) for up to timeout, as SQLite's busy handler would for busy_timeout.
type writeLockWaiter struct {
	timeout time.Duration
	// sleep waits d, or returns ctx's error once ctx ends.
	sleep func(ctx context.Context, d time.Duration) error
}

// sleepFor waits d, or until ctx ends. A wait under a millisecond is too short to be worth
// interrupting, and a timer too coarse for it (shortSleep).
func sleepFor(ctx context.Context, d time.Duration) error {
	if d < time.Millisecond {
		shortSleep(d)
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// restoreBusyTimeoutSQL sets the connection's busy timeout back to what Open gave it, for
// the writes that run on it outside a group.
var restoreBusyTimeoutSQL = fmt.Sprintf(`PRAGMA busy_timeout = %d`, busyTimeout.Milliseconds())

// begin begins a transaction on conn (BEGIN IMMEDIATE: the pool's _txlock), waiting for the
// write lock as the type says. The connection's busy timeout is back as it was when begin
// returns; a connection whose timeout could not be put back is dropped from the pool.
func (w writeLockWaiter) begin(ctx context.Context, conn *sql.Conn) (*sql.Tx, error) {
	if _, err := conn.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err != nil {
		return nil, fmt.Errorf("lift the busy timeout: %w", err)
	}
	tx, err := w.tryBegin(ctx, conn)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), restoreBusyTimeoutSQL); rerr != nil {
		if tx != nil {
			_ = tx.Rollback()
		}
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return nil, errors.Join(err, fmt.Errorf("restore the busy timeout: %w", rerr))
	}
	return tx, err
}

// tryBegin begins a transaction on conn, trying again after each writeLockRetries delay
// while the lock is busy, until the delays add up to more than timeout: it then returns the
// busy error, as SQLite would at the end of its busy timeout.
func (w writeLockWaiter) tryBegin(ctx context.Context, conn *sql.Conn) (*sql.Tx, error) {
	var waited time.Duration
	for try := 0; ; try++ {
		tx, err := conn.BeginTx(ctx, nil)
		if err == nil || errorCode(err)&0xff != sqlite3lib.SQLITE_BUSY {
			return tx, err
		}
		delay := writeLockRetries[min(try, len(writeLockRetries)-1)]
		if waited+delay > w.timeout {
			return nil, err
		}
		if serr := w.sleep(ctx, delay); serr != nil {
			return nil, serr
		}
		waited += delay
	}
}
