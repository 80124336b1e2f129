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
// same round trip: each row is at least as new as the entry that names it. The entries $3
// were announced with their rows (announce.go), which are kept already: their rows are not
// read again.
const changedRowsSQL = `SELECT ` + resourceColumns + ` FROM resources
	 WHERE id = ANY (ARRAY(SELECT c.resource_id FROM change_log c
	                        WHERE c.seq > $1 AND c.seq <> ALL ($3::bigint[]) ORDER BY c.seq LIMIT $2))`

// changedRows are the rows read with the change log, until a reconcile takes them.
type changedRows struct {
	mu   sync.Mutex
	rows map[string]domain.Resource
	// announced holds the seqs of the entries announced with their rows and not yet passed
	// by a read of the log: the read after the announcement's wake-up would otherwise bring
	// each announced row a second time (about 100 us of server time per resource created
	// alone, a twentieth of its database time), to keep it where nothing takes it.
	announced map[int64]struct{}
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

// keep records rows, those of the entries just read after after (read of them), and
// whether the next read brings rows.
func (c *changedRows) keep(rows []domain.Resource, after int64, read int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.small = read < changedRowsBelow
	c.forgetAnnouncedUpTo(after)
	if c.rows == nil || len(c.rows)+len(rows) > maxChangedRows {
		c.rows = make(map[string]domain.Resource)
	}
	for _, r := range rows {
		c.rows[r.ID] = r
	}
}

// keepAnnounced keeps the row an announcement of entry seq brought, whatever the last read
// was: the resource's reconcile may start before any read of the log reaches its entry.
func (c *changedRows) keepAnnounced(seq int64, r domain.Resource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil || len(c.rows) >= maxChangedRows {
		c.rows = make(map[string]domain.Resource)
	}
	c.rows[r.ID] = r
	if c.announced == nil || len(c.announced) >= maxChangedRows {
		c.announced = make(map[int64]struct{})
	}
	c.announced[seq] = struct{}{}
}

// announcedAfter returns the seqs after after of the entries announced with their rows,
// whose rows a read of the log need not bring.
func (c *changedRows) announcedAfter(after int64) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetAnnouncedUpTo(after)
	seqs := make([]int64, 0, len(c.announced))
	for seq := range c.announced {
		seqs = append(seqs, seq)
	}
	return seqs
}

// forgetAnnouncedUpTo drops the announced seqs a read from after has passed; the caller
// holds mu.
func (c *changedRows) forgetAnnouncedUpTo(after int64) {
	for seq := range c.announced {
		if seq <= after {
			delete(c.announced, seq)
		}
	}
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
	b.Queue(changedRowsSQL, after, rowsLimit, s.changed.announcedAfter(after)).Query(func(r pgx.Rows) error {
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
	s.changed.keep(kept, after, len(out))
	return out, nil
}
