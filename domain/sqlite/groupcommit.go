package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// maxGroup bounds the writes one commit carries, so a long queue cannot delay the first of
// them without end.
const maxGroup = 64

// groupCommit runs the write transactions of concurrent callers in shared SQLite
// transactions: one commit (one sync of the write-ahead log, which synchronous=FULL makes
// on every commit) for as many writes as queued up meanwhile. Each write runs inside its
// own savepoint, one after the other, so it sees the writes before it as a serial
// transaction would, and one that fails is rolled back alone. A caller returns only once
// the commit that carried its write is durable, or with the error that kept it out.
//
// No goroutine of its own: the caller that finds no commit in progress leads one, and
// hands the lead to the next waiting caller when done.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*groupWrite
	leading bool
}

// groupWrite is one caller's write transaction.
type groupWrite struct {
	ctx  context.Context
	f    func(tx *sql.Tx) error
	done chan error    // the outcome, sent once
	lead chan struct{} // closed when this caller is to lead the next commit

	// state is pending until the leader starts the write (running) or its caller gives
	// up waiting (abandoned); guarded by groupCommit.mu.
	state writeState
}

type writeState int

const (
	writePending writeState = iota
	writeRunning
	writeAbandoned
)

// run runs f in a write transaction shared with concurrent callers and waits for the commit.
// A caller whose ctx ends before its write started returns ctx's error, and its write never
// runs; once started, the write's outcome is awaited whatever ctx does.
func (g *groupCommit) run(ctx context.Context, db *sql.DB, f func(tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &groupWrite{ctx: ctx, f: f, done: make(chan error, 1), lead: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if !g.leading {
		g.leading = true
		g.mu.Unlock()
		g.commitNext(db)
		return <-w.done
	}
	g.mu.Unlock()
	select {
	case err := <-w.done:
		return err
	case <-w.lead:
		g.commitNext(db)
		return <-w.done
	case <-ctx.Done():
		g.mu.Lock()
		if w.state == writePending {
			w.state = writeAbandoned
			promoted := w.isLead()
			g.mu.Unlock()
			if promoted {
				// The lead was handed to this caller as it gave up: pass it on.
				g.commitNext(db)
			}
			return ctx.Err()
		}
		g.mu.Unlock()
		return <-w.done
	}
}

// isLead says the lead was handed to w.
func (w *groupWrite) isLead() bool {
	select {
	case <-w.lead:
		return true
	default:
		return false
	}
}

// commitNext commits the writes at the head of the queue, then hands the lead to the first
// caller still waiting, or gives it up when none is.
func (g *groupCommit) commitNext(db *sql.DB) {
	g.mu.Lock()
	var batch []*groupWrite
	for len(g.queue) > 0 && len(batch) < maxGroup {
		w := g.queue[0]
		g.queue[0] = nil
		g.queue = g.queue[1:]
		if w.state == writePending && w.ctx.Err() == nil {
			w.state = writeRunning
			batch = append(batch, w)
		} else if w.state == writePending {
			w.state = writeAbandoned
			w.done <- w.ctx.Err()
		}
	}
	g.mu.Unlock()
	if len(batch) > 0 {
		commitGroup(db, batch)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.queue) > 0 {
		if next := g.queue[0]; next.state == writePending {
			close(next.lead)
			return
		}
		g.queue[0] = nil
		g.queue = g.queue[1:]
	}
	g.leading = false
}

// commitGroup runs batch's writes in one transaction and tells each its outcome. The
// transaction is not bound to any caller's context, so a caller that stops waiting cannot
// roll back the others' writes.
func commitGroup(db *sql.DB, batch []*groupWrite) {
	outcome := make([]error, len(batch))
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		for _, w := range batch {
			w.done <- err
		}
		return
	}
	for i, w := range batch {
		if outcome[i], err = runInSavepoint(tx, w.f); err != nil {
			// The transaction itself broke (an interrupted statement rolls all of it
			// back): nothing of the batch is written.
			_ = tx.Rollback()
			for _, w := range batch {
				w.done <- fmt.Errorf("write transaction: %w", err)
			}
			return
		}
	}
	commitErr := tx.Commit()
	for i, w := range batch {
		if outcome[i] == nil {
			outcome[i] = commitErr
		}
		w.done <- outcome[i]
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
