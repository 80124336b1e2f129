package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/berth-dev/berth/domain/internal/backend"
)

// maxGroup bounds the writes one commit carries, so a long queue cannot delay the first of
// them without end: a group of 128 one-transaction provisions takes about 35ms. At the
// agent's 256 reconciles in flight, groups of at most 64 made a burst 11% slower (2,770
// against 3,110 runtimes/s): half the reconciles waited for the next commit instead of
// riding the current one, and the writer sat idle while they caught up.
const maxGroup = 128

// groupCommit runs the write transactions of concurrent callers in shared SQLite
// transactions (a backend.Group): one commit (one sync of the write-ahead log, which
// synchronous=FULL makes on every commit) for as many writes as queued up meanwhile. Each
// write runs inside its own savepoint, one after the other, so it sees the writes before it
// as a serial transaction would, and one that fails is rolled back alone. A caller returns
// only once the commit that carried its write is durable, or with the error that kept it out.
type groupCommit = backend.Group[*groupWrite]

// groupWrite is one caller's write transaction and its outcome. A one-transaction provision
// sets instant instead of f: it is handed the usage memo. A write with neither only waits
// for the write lock (awaitWriters), and writes nothing.
type groupWrite struct {
	f       func(tx *sql.Tx) error
	instant func(tx *sql.Tx, usage *usageMemo) error
	err     error
}

func newGroupCommit(db *sql.DB) *groupCommit {
	return backend.NewGroup(maxGroup, (&committer{db: db, lock: writeLockWaiter{timeout: busyTimeout, sleep: sleepFor}}).commit)
}

// maxMemoOwners bounds the owners whose usage the memo keeps between groups: past it, the
// next group reads afresh what it needs.
const maxMemoOwners = 4096

// committer runs the groups' transactions, one group at a time (the Group's lead runs
// them), and keeps the slot usage their one-transaction provisions read from one group to
// the next, as long as nothing else wrote the file in between: reading it again at every
// group was 7% of the writer's time in a burst of the static pool (50 owners, 12 hosts),
// each group reading every owner of its calls. mark says where the file's writes stood
// when the last group committed; a group that finds them anywhere else reads the usage
// again.
type committer struct {
	db    *sql.DB
	lock  writeLockWaiter
	usage usageMemo
	mark  writeMark
}

// writeMark is where the file's writes stood as seen from the writing connection: which
// connection (its serial; 0, none), the rows it has changed (total_changes(), which counts
// every row any statement of it changed, a write outside a group included) and the file's
// data_version (which moves on with every commit of any other connection, of this process
// or another). Two equal marks mean nothing was written between them.
type writeMark struct {
	conn             uint64
	changes, version int64
}

// readMark reads the mark of tx's connection, whose serial is conn.
func readMark(ctx context.Context, tx *sql.Tx, conn uint64) (writeMark, error) {
	m := writeMark{conn: conn}
	err := tx.QueryRowContext(ctx, `SELECT total_changes(), data_version FROM pragma_data_version()`).Scan(&m.changes, &m.version)
	return m, err
}

// commit runs batch's writes in one transaction and tells each its outcome. ctx ends only
// once every caller of the batch gave up, so one caller that stops waiting cannot roll
// back the others' writes.
func (c *committer) commit(ctx context.Context, batch []*groupWrite) {
	fail := func(err error) {
		c.forget()
		for _, w := range batch {
			if w.err == nil {
				w.err = err
			}
		}
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		fail(err)
		return
	}
	defer conn.Close()
	tx, err := c.lock.begin(ctx, conn)
	if err != nil {
		fail(err)
		return
	}
	serial := connSerial(conn)
	// The write lock is this transaction's from BEGIN: nobody writes until it ends.
	if m, err := readMark(ctx, tx, serial); err != nil || serial == 0 || m != c.mark || len(c.usage.owners) > maxMemoOwners {
		c.usage.forget()
	}
	c.mark = writeMark{}
	for _, w := range batch {
		f := w.f
		switch {
		case w.instant != nil:
			f = func(tx *sql.Tx) error { return w.instant(tx, &c.usage) }
		case f == nil:
			continue
		default:
			c.usage.forget()
		}
		var txErr error
		if w.err, txErr = runInSavepoint(tx, f); txErr != nil {
			// The transaction itself broke (an interrupted statement rolls all of it
			// back): nothing of the batch is written.
			_ = tx.Rollback()
			c.forget()
			for _, w := range batch {
				w.err = fmt.Errorf("write transaction: %w", txErr)
			}
			return
		}
	}
	mark, markErr := readMark(ctx, tx, serial)
	if err := tx.Commit(); err != nil {
		fail(err)
		return
	}
	if markErr == nil {
		c.mark = mark
	}
}

// forget drops the usage kept, for a group whose writes may not have been committed.
func (c *committer) forget() {
	c.usage.forget()
	c.mark = writeMark{}
}

// connSerial returns the serial of conn's driver connection (a cachingConn), 0 when it
// has none.
func connSerial(conn *sql.Conn) uint64 {
	var serial uint64
	_ = conn.Raw(func(dc any) error {
		if cc, ok := dc.(*cachingConn); ok {
			serial = cc.serial
		}
		return nil
	})
	return serial
}

// runInSavepoint runs f in a savepoint of tx, rolled back when f fails. It returns f's error,
// and an error of its own when the savepoint could not be kept or rolled back.
func runInSavepoint(tx *sql.Tx, f func(tx *sql.Tx) error) (fErr, txErr error) {
	if _, err := tx.Exec(`SAVEPOINT berth_write`); err != nil {
		return nil, err
	}
	if fErr = f(tx); fErr != nil {
		if _, err := tx.Exec(`ROLLBACK TO berth_write`); err != nil {
			return fErr, errors.Join(fErr, err)
		}
	}
	if _, err := tx.Exec(`RELEASE berth_write`); err != nil {
		return fErr, err
	}
	return fErr, nil
}
