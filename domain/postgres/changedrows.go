package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
)

// changedRowsBelow is the size under which a read of the change log makes the next one
// bring its resources' rows too: a watcher that keeps up reads a few entries at a time,
// and each reconcile they start would otherwise read its row in a round trip of its own,
// on an idle agent a sixth of the time from a resource's insert to its ready record. The
// read after a page of a burst (hundreds of entries) brings none, so that the rows of a
// backlog are read when their reconciles start, not all at once and held meanwhile. It is
// also the most rows a read brings: the first read of a burst follows a small one, and
// bringing its page's 1,000 rows, just written and read for the first time, took it 40 to
// 80 ms on a loaded server, where the entries alone take 1 to 5: every entry after the page,
// another owner's included, waited for it.
const changedRowsBelow = 64

// maxChangedRows bounds the rows kept: past it, every row kept is dropped. Rows of
// resources another agent reconciles are never taken.
const maxChangedRows = 1024

// changedRowsSQL reads the rows of the resources of the change-log entries after $1, up
// to $2 of them (at most changedRowsBelow), in the read after the entries' own and in the
// same round trip: each row is at least as new as the entry that names it.
const changedRowsSQL = `SELECT ` + resourceColumns + ` FROM resources
	 WHERE id = ANY (ARRAY(SELECT c.resource_id FROM change_log c WHERE c.seq > $1 ORDER BY c.seq LIMIT $2))`

// changedRows are the rows read with the change log, until a reconcile takes them.
type changedRows struct {
	mu   sync.Mutex
	rows map[string]domain.Resource
	// small says the last read of the change log was of fewer than changedRowsBelow
	// entries; taken, that a row was asked for: reads bring rows only for an agent whose
	// reconciles use them.
	small, taken bool
}

// want reports whether the next read brings the rows.
func (c *changedRows) want() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.small && c.taken
}

// keep records rows, those of the entries just read (read), and whether the next read
// brings rows.
func (c *changedRows) keep(rows []domain.Resource, read int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.small = read < changedRowsBelow
	if c.rows == nil || len(c.rows)+len(rows) > maxChangedRows {
		c.rows = make(map[string]domain.Resource)
	}
	for _, r := range rows {
		c.rows[r.ID] = r
	}
}

// keepAnnounced keeps the row an announcement brought, whatever the last read was: the
// resource's reconcile may start before any read of the log reaches its entry.
func (c *changedRows) keepAnnounced(r domain.Resource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil || len(c.rows) >= maxChangedRows {
		c.rows = make(map[string]domain.Resource)
	}
	c.rows[r.ID] = r
}

// take returns, once, the row of resource id as read with its latest change.
func (c *changedRows) take(id string) (domain.Resource, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.taken = true
	r, ok := c.rows[id]
	if ok {
		delete(c.rows, id)
	}
	return r, ok
}

// ChangedResource returns, once, the row of resource id as this State read it with the
// resource's latest change in the log, when that read brought the rows (changedRowsBelow);
// false when there is none. The row is as new as that change, and may be older than the
// table's: a caller acts on it only where the write checks the row again.
func (s *State) ChangedResource(id string) (domain.Resource, bool) {
	return s.changed.take(id)
}

// changesWithRows reads the change-log entries after after (up to limit, nil: all) and the
// rows of the resources of the first changedRowsBelow of them in one round trip, keeping
// those rows.
func (s *State) changesWithRows(ctx context.Context, after int64, limit *int) ([]domain.Change, error) {
	var (
		out  []domain.Change
		rows []domain.Resource
	)
	b := &pgx.Batch{}
	b.Queue(changesAfterSQL, after, limit).Query(func(r pgx.Rows) error {
		var err error
		out, err = pgx.CollectRows(r, scanChange)
		return err
	})
	rowsLimit := changedRowsBelow
	if limit != nil {
		rowsLimit = min(*limit, changedRowsBelow)
	}
	b.Queue(changedRowsSQL, after, rowsLimit).Query(func(r pgx.Rows) error {
		var err error
		rows, err = pgx.CollectRows(r, func(row pgx.CollectableRow) (domain.Resource, error) { return scanResource(row) })
		return err
	})
	if err := s.changeLog.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("read changes after %d: %w", after, err)
	}
	named := make(map[string]bool, len(out))
	for _, c := range out {
		named[c.ResourceID] = true
	}
	kept := rows[:0]
	for _, r := range rows {
		if named[r.ID] {
			kept = append(kept, r)
		}
	}
	s.changed.keep(kept, len(out))
	return out, nil
}
