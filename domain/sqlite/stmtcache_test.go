package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"

	sqlite3 "modernc.org/sqlite"
)

// countingConn counts the statements the driver prepares: each PrepareContext, and each
// ExecContext and QueryContext, which the driver runs by preparing the text first.
type countingConn struct {
	sqliteConn
	prepares *int
}

func (c countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	*c.prepares++
	return c.sqliteConn.PrepareContext(ctx, query)
}

func (c countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	*c.prepares++
	return c.sqliteConn.ExecContext(ctx, query, args)
}

func (c countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	*c.prepares++
	return c.sqliteConn.QueryContext(ctx, query, args)
}

type countingConnector struct {
	driver.Connector
	prepares *int
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{sqliteConn: conn.(sqliteConn), prepares: c.prepares}, nil
}

// cachingDB opens one caching connection on a new file with a table t of numbers, and
// returns it with the count of statements the driver prepared since.
func cachingDB(t *testing.T) (*sql.DB, *int) {
	t.Helper()
	dsn := "file:" + (&url.URL{Path: filepath.Join(t.TempDir(), "cache.db")}).EscapedPath()
	inner, err := sqlite3.NewConnector(dsn)
	if err != nil {
		t.Fatal(err)
	}
	prepares := new(int)
	db := sql.OpenDB(cachingConnector{countingConnector{Connector: inner, prepares: prepares}})
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (n INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	*prepares = 0
	return db, prepares
}

func TestCachingConnPreparesAStatementOnce(t *testing.T) {
	db, prepares := cachingDB(t)
	for i := range 10 {
		if _, err := db.Exec(`INSERT INTO t (n) VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM t WHERE n <= $1`, i).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != i+1 {
			t.Fatalf("after inserting 0..%d, %d rows are at most %d", i, n, i)
		}
	}
	if *prepares != 2 {
		t.Errorf("two statements run ten times each were prepared %d times, want 2", *prepares)
	}
}

func TestCachingConnRunsAStatementWhoseRowsAreOpen(t *testing.T) {
	db, _ := cachingDB(t)
	const query = `SELECT n FROM t WHERE n >= $1 ORDER BY n`
	if _, err := db.Exec(`INSERT INTO t (n) VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	outer, err := tx.Query(query, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for outer.Next() {
		var n int
		if err := outer.Scan(&n); err != nil {
			t.Fatal(err)
		}
		// The same text, while the outer rows are still open, must not reset them.
		var first int
		if err := tx.QueryRow(query, n).Scan(&first); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%d", n, first))
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if want := "[1:1 2:2 3:3]"; fmt.Sprint(got) != want {
		t.Errorf("nested reads gave %v, want %s", got, want)
	}
}

func TestCachingConnKeepsABoundedNumberOfStatements(t *testing.T) {
	db, prepares := cachingDB(t)
	for i := range stmtCacheSize + 10 {
		if _, err := db.Exec(fmt.Sprintf(`INSERT INTO t (n) VALUES (%d)`, i)); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	err = conn.Raw(func(c any) error {
		if n := len(c.(*cachingConn).byQuery); n != stmtCacheSize {
			return fmt.Errorf("%d statements run once each left %d cached, want %d", stmtCacheSize+10, n, stmtCacheSize)
		}
		return nil
	})
	conn.Close()
	if err != nil {
		t.Error(err)
	}
	// The first statement was evicted: it is prepared again; the last one is not.
	*prepares = 0
	if _, err := db.Exec(`INSERT INTO t (n) VALUES (0) ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`INSERT INTO t (n) VALUES (%d)`, stmtCacheSize+9)); err == nil {
		t.Fatal("inserting a row again broke no key")
	}
	if *prepares != 1 {
		t.Errorf("a new statement and a cached one were prepared %d times, want 1", *prepares)
	}
}

func TestCachingConnSeesSchemaChanges(t *testing.T) {
	db, _ := cachingDB(t)
	const query = `SELECT * FROM t`
	if _, err := db.Exec(`INSERT INTO t (n) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`ALTER TABLE t ADD COLUMN name TEXT NOT NULL DEFAULT 'one'`); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := db.QueryRow(query).Scan(&n, &name); err != nil {
		t.Fatalf("the cached %s after adding a column: %v", query, err)
	}
	if n != 1 || name != "one" {
		t.Errorf("read (%d, %q), want (1, \"one\")", n, name)
	}
}
