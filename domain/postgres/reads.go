package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/berth-dev/berth/domain"
)

// readCall is one GetResource in a group of concurrent reads.
type readCall struct {
	uid   pgtype.UUID
	ran   bool // the call ran in the group; else the caller reads alone
	found bool
	row   domain.Resource
}

// readManySQL reads the rows of the ids $1.
const readManySQL = `SELECT ` + resourceColumns + ` FROM resources WHERE id = ANY ($1::uuid[])`

// GetResource returns the resource or an error wrapping domain.ErrNotFound. Reads made at the same time share
// one statement (see backend.Group): the agent reads each row it reconciles, and one
// statement per read was a third of its CPU under load. Alone, a read runs at once.
func (s *State) GetResource(ctx context.Context, id string) (domain.Resource, error) {
	uid, err := parseID(id)
	if err != nil {
		return domain.Resource{}, err
	}
	call := &readCall{uid: uid}
	if err := s.reads.Do(ctx, call); err != nil {
		return domain.Resource{}, fmt.Errorf("get resource %s: %w", id, err)
	}
	if call.ran {
		if !call.found {
			return domain.Resource{}, notFound(id)
		}
		return call.row, nil
	}
	r, err := scanResource(s.pool.QueryRow(ctx, `SELECT `+resourceColumns+` FROM resources WHERE id = $1`, uid))
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Resource{}, notFound(id)
	}
	if err != nil {
		return domain.Resource{}, fmt.Errorf("get resource %s: %w", id, err)
	}
	return r, nil
}

// runReads reads the calls' rows in one statement. A second read of the same row in the
// group, and every read when the statement fails, is left to its caller to make alone: a
// row read is the caller's own, never shared.
func (s *State) runReads(ctx context.Context, calls []*readCall) {
	byID := make(map[[16]byte]*readCall, len(calls))
	uids := make([]pgtype.UUID, 0, len(calls))
	for _, c := range calls {
		if _, dup := byID[c.uid.Bytes]; dup {
			continue
		}
		byID[c.uid.Bytes] = c
		uids = append(uids, c.uid)
	}
	rows, err := s.pool.Query(ctx, readManySQL, uids)
	if err != nil {
		return
	}
	defer rows.Close()
	read := make(map[[16]byte]domain.Resource, len(uids))
	for rows.Next() {
		r, err := scanResource(rows)
		if err != nil {
			return
		}
		uid, err := parseID(r.ID)
		if err != nil {
			return
		}
		read[uid.Bytes] = r
	}
	if rows.Err() != nil {
		return
	}
	for key, c := range byID {
		c.row, c.found = read[key]
		c.ran = true
	}
}
