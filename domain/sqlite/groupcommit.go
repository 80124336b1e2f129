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
// sets instant instead of f: it is handed the group's usage memo.
type groupWrite struct {
	f       func(tx *sql.Tx) error
	instant func(tx *sql.Tx, usage *usageMemo) error
	err     error
}

func newGroupCommit(db *sql.DB) *groupCommit {
	return backend.NewGroup(maxGroup, func(ctx context.Context, batch []*groupWrite) { commitGroup(ctx, db, batch) })
}

// commitGroup runs batch's writes in one transaction and tells each its outcome. ctx ends
// only once every caller of the batch gave up, so one caller that stops waiting cannot roll
// back the others' writes.
func commitGroup(ctx context.Context, db *sql.DB, batch []*groupWrite) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		for _, w := range batch {
			w.err = err
		}
		return
	}
	var usage usageMemo
	for _, w := range batch {
		f := w.f
		if w.instant != nil {
			f = func(tx *sql.Tx) error { return w.instant(tx, &usage) }
		} else {
			usage.forget()
		}
		var txErr error
		if w.err, txErr = runInSavepoint(tx, f); txErr != nil {
			// The transaction itself broke (an interrupted statement rolls all of it
			// back): nothing of the batch is written.
			_ = tx.Rollback()
			for _, w := range batch {
				w.err = fmt.Errorf("write transaction: %w", txErr)
			}
			return
		}
	}
	if err := tx.Commit(); err != nil {
		for _, w := range batch {
			if w.err == nil {
				w.err = err
			}
		}
	}
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
