package sqlite

import (
	"container/list"
	"context"
	"database/sql/driver"
	"fmt"
	"sync/atomic"
)

// stmtCacheSize bounds the statements each connection keeps prepared. The store's own
// statements are a few dozen; the bound keeps one-off text (migrations, the shell's queries)
// from growing the cache without end.
const stmtCacheSize = 128

// cachingConnector opens connections that keep the statements they run prepared, by text,
// and run them again from there. database/sql hands a statement with arguments to the
// driver, which prepares it, runs it and finalizes it: on SQLite preparing is parsing and
// planning, and for an UPDATE of resources also coding every trigger of the table, which
// cost more than running the statement. A prepared statement is re-prepared by SQLite when
// the schema changes, so a cached one never runs against a schema it was not planned for.
type cachingConnector struct {
	driver.Connector
}

// sqliteConn is what cachingConn needs of the driver's connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("the SQLite driver's connection (%T) cannot run statements with a context", conn)
	}
	return &cachingConn{sqliteConn: sc, serial: connSerials.Add(1), order: list.New(), byQuery: make(map[string]*list.Element)}, nil
}

// connSerials numbers the connections opened, from 1: a connection's serial tells it from
// every other of the process, one opened later at the same address included.
var connSerials atomic.Uint64

// cachingConn is a connection with its prepared statements, the most recently used first.
// database/sql uses a connection from one goroutine at a time, so it needs no lock.
type cachingConn struct {
	sqliteConn
	serial  uint64
	order   *list.List // of *cachedStmt
	byQuery map[string]*list.Element
}

// cachedStmt is a prepared statement, and whether rows it returned are still open (it
// cannot run again until they are closed).
type cachedStmt struct {
	query string
	stmt  interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	}
	open bool
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, err := c.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	return s.stmt.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, err := c.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := s.stmt.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	s.open = true
	return &cachedRows{Rows: rows, stmt: s}, nil
}

// Close finalizes the cached statements and closes the connection.
func (c *cachingConn) Close() error {
	for e := c.order.Front(); e != nil; e = e.Next() {
		_ = e.Value.(*cachedStmt).stmt.Close()
	}
	c.order.Init()
	clear(c.byQuery)
	return c.sqliteConn.Close()
}

// prepared returns the cached statement for query, preparing it if need be; nil when it is
// in use by rows still open, or the driver's statement lacks what the cache needs: the
// caller runs query unprepared.
func (c *cachingConn) prepared(ctx context.Context, query string) (*cachedStmt, error) {
	if e, ok := c.byQuery[query]; ok {
		s := e.Value.(*cachedStmt)
		if s.open {
			return nil, nil
		}
		c.order.MoveToFront(e)
		return s, nil
	}
	ds, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s := &cachedStmt{query: query}
	var ok bool
	if s.stmt, ok = ds.(interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	}); !ok {
		_ = ds.Close()
		return nil, nil
	}
	c.byQuery[query] = c.order.PushFront(s)
	for c.order.Len() > stmtCacheSize && c.evict(c.order.Back()) {
	}
	return s, nil
}

// evict drops the least recently used statement, from e on, that no open rows use, and
// says whether there was one.
func (c *cachingConn) evict(e *list.Element) bool {
	for ; e != nil; e = e.Prev() {
		if s := e.Value.(*cachedStmt); !s.open {
			c.order.Remove(e)
			delete(c.byQuery, s.query)
			_ = s.stmt.Close()
			return true
		}
	}
	return false
}

// cachedRows are the rows of a cached statement, which they keep in use until closed.
type cachedRows struct {
	driver.Rows
	stmt *cachedStmt
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.stmt.open = false
	return err
}
