package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

// State is domain.State on one SQLite database file.
type State struct {
	path  string
	file  os.FileInfo // the file opened, to notice it being removed or replaced
	write *sql.DB     // one connection: this process's writes queue on it
	read  *sql.DB
	wake  *broadcaster
	group *groupCommit // shares commits between this process's concurrent writes
	// schema is the schema version this build knows: the fenced writes apply only while
	// the database's is no newer.
	schema int
}

var _ domain.State = (*State)(nil)

const (
	// busyTimeout is how long a statement waits for another process's write lock.
	busyTimeout = 10 * time.Second
	// readConns bounds the pool of reading connections.
	readConns = 4
)

// Open opens (creating it if need be, readable by its owner only) the database file at path
// and checks it answers. It does not migrate the schema (see Migrate). Its directory must
// exist.
func Open(ctx context.Context, path string) (*State, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("database file %q: give the path of a file (an in-memory database cannot be shared by the agent and the CLI)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("database file %s: %w", path, err)
	}
	migrations, err := embeddedMigrations()
	if err != nil {
		return nil, err
	}
	if err := createPrivate(abs); err != nil {
		return nil, err
	}
	common := "_pragma=busy_timeout(" + fmt.Sprint(busyTimeout.Milliseconds()) + ")&_pragma=foreign_keys(1)&_pragma=temp_store(MEMORY)"
	write, err := openPool(ctx, abs, common+"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate", 1)
	if err != nil {
		return nil, err
	}
	read, err := openPool(ctx, abs, common+"&_pragma=query_only(1)", readConns)
	if err != nil {
		write.Close()
		return nil, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		read.Close()
		write.Close()
		return nil, fmt.Errorf("database file %s: %w", abs, err)
	}
	return &State{path: abs, file: info, write: write, read: read, wake: newBroadcaster(), group: newGroupCommit(write),
		schema: backend.KnownVersion(migrations)}, nil
}

// createPrivate creates the database file, if there is none, readable and writable by its
// owner only: it holds every resource's configuration. SQLite creates a new file 0644, and
// gives the -wal and -shm files it creates beside it the database file's mode, so creating
// the file first is what keeps all three private.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		return f.Close()
	case errors.Is(err, fs.ErrExist):
		return nil
	default:
		return fmt.Errorf("create database file %s: %w (check that its directory exists and is writable)", path, err)
	}
}

// ExposedFiles returns those of the database file at path and its -wal and -shm files that
// users other than the owner may read or write, for a warning: Open creates them private,
// but a file made by an older Berth, or copied in, may not be.
func ExposedFiles(path string) []string {
	var exposed []string
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if info, err := os.Stat(p); err == nil && info.Mode().Perm()&0o077 != 0 {
			exposed = append(exposed, p)
		}
	}
	return exposed
}

// openPool opens a pool of at most conns connections on the file and connects one, which
// creates the file and applies the pragmas. Its connections keep their statements prepared
// (cachingConnector).
func openPool(ctx context.Context, path, params string, conns int) (*sql.DB, error) {
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + params
	connector, err := sqlite3.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("open database file %s: %w", path, err)
	}
	db := sql.OpenDB(cachingConnector{connector})
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database file %s: %w (check that its directory exists and is writable)", path, err)
	}
	return db, nil
}

// Path returns the absolute path of the database file.
func (s *State) Path() string { return s.path }

// Ping checks the database answers and its file is still the one opened: a file removed or
// replaced under a running agent would otherwise go on taking writes that nobody can read.
func (s *State) Ping(ctx context.Context) error {
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		return fmt.Errorf("ping database %s: %w", s.path, err)
	}
	info, err := os.Stat(s.path)
	if err != nil || !os.SameFile(info, s.file) {
		return fmt.Errorf("ping database: the file %s was removed or replaced since it was opened; restart to use the file now at that path", s.path)
	}
	return nil
}

// Close closes every connection.
func (s *State) Close() {
	_ = s.read.Close()
	_ = s.write.Close()
}

// DB returns the pool this State writes through (one connection), for tests, benchmarks
// and tools that need raw SQL. Writes made through it are seen by this State's listeners
// as another process's writes are.
func (s *State) DB() *sql.DB { return s.write }

// inTx runs f in a write transaction, which takes the file's write lock at BEGIN, and wakes
// this State's change listeners once it commits. Concurrent calls share transactions and
// commits (groupCommit), each in its own savepoint: to f it is a transaction of its own. f
// must use tx only: the State has one writing connection and tx holds it.
func (s *State) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	return s.runWrite(ctx, &groupWrite{f: f})
}

// inInstantTx is inTx for a one-transaction provision, which reads the slot usage through
// its group's usageMemo and adds its reservation to it once nothing of it can fail.
func (s *State) inInstantTx(ctx context.Context, f func(tx *sql.Tx, usage *usageMemo) error) error {
	return s.runWrite(ctx, &groupWrite{instant: f})
}

// inQuietTx is inTx for a write that logs no change (the agent's own bookkeeping: its
// registration and heartbeat, the leadership, a budget draw): it wakes no change listener.
func (s *State) inQuietTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	return s.runQuietWrite(ctx, &groupWrite{f: f})
}

// runWrite runs w in the next shared commit and wakes this State's change listeners once
// it is committed.
func (s *State) runWrite(ctx context.Context, w *groupWrite) error {
	if err := s.runQuietWrite(ctx, w); err != nil {
		return err
	}
	s.wake.broadcast()
	return nil
}

// runQuietWrite runs w in the next shared commit and returns its outcome.
func (s *State) runQuietWrite(ctx context.Context, w *groupWrite) error {
	if err := s.group.Do(ctx, w); err != nil {
		return err
	}
	return w.err
}

// exec runs one writing statement in the next shared commit and wakes this State's change
// listeners. It returns the rows the statement changed.
func (s *State) exec(ctx context.Context, query string, args ...any) (int64, error) {
	return execIn(ctx, s.inTx, query, args...)
}

// execQuiet is exec for a statement that logs no change (inQuietTx).
func (s *State) execQuiet(ctx context.Context, query string, args ...any) (int64, error) {
	return execIn(ctx, s.inQuietTx, query, args...)
}

// execIn runs one writing statement in a transaction of in and returns the rows it changed.
func execIn(ctx context.Context, in func(context.Context, func(tx *sql.Tx) error) error, query string, args ...any) (int64, error) {
	var n int64
	err := in(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	return n, err
}

// timeLayout is the one form times are stored in: UTC, fixed width, so that text order is
// time order. SQL writes it as strftime('%Y-%m-%dT%H:%M:%fZ', ...).
const timeLayout = "2006-01-02T15:04:05.000Z"

// nowSQL is the database clock in the stored form.
const nowSQL = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`

// touchSQL is the SET item of an UPDATE of resources that moves updated_at forward as
// resources_after_update would (to now, or a millisecond past its value when that is not
// earlier). A write that sets it, writes times in the stored form and leaves args alone
// leaves that trigger nothing to change, so the row is written once, not twice. ('now' is
// one value throughout a statement, its triggers included.)
const touchSQL = `updated_at = CASE WHEN ` + nowSQL + ` > updated_at THEN ` + nowSQL +
	` ELSE strftime('%Y-%m-%dT%H:%M:%fZ', updated_at, '+0.001 seconds') END`

// statusChangedSQL is the SET item of an UPDATE of resources that sets the status to
// newStatus (an expression) and status_changed_at as resources_after_update would: to now
// when the status changes. A write that sets it leaves that trigger nothing to change on its
// account, as touchSQL does for updated_at.
func statusChangedSQL(newStatus string) string {
	return `status_changed_at = CASE WHEN status IS NOT ` + newStatus + ` THEN ` + nowSQL + ` ELSE status_changed_at END`
}

// FormatTime returns t in the form the database stores times in (UTC, millisecond precision),
// for SQL that compares with or writes a time column.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// optionalTime is FormatTime of *t, or NULL.
func optionalTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return FormatTime(*t)
}

func parseTime(column, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("column %s holds %q, which is not a time: %w", column, s, err)
	}
	return t, nil
}

func parseOptionalTime(column string, s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := parseTime(column, s.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// encodeJSON renders a JSON column's value; nil stays NULL (keep the column).
func encodeJSON(column string, m map[string]any) (any, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, &domain.FieldError{Field: column, Msg: "cannot be stored as JSON: " + err.Error()}
	}
	return string(b), nil
}

// encodeObject is encodeJSON with nil stored as {}.
func encodeObject(column string, m map[string]any) (string, error) {
	if m == nil {
		return "{}", nil
	}
	v, err := encodeJSON(column, m)
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// errorCode returns the SQLite result code of err, or 0 when it has none.
func errorCode(err error) int {
	var e *sqlite3.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

func isUniqueViolation(err error) bool {
	code := errorCode(err)
	return code == sqlite3lib.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3lib.SQLITE_CONSTRAINT_PRIMARYKEY
}

// checkMessages explains each check constraint of the schema as a field error: the shared
// ones and those of the checks SQLite needs where PostgreSQL has column types.
var checkMessages = backend.CheckMessages(map[string]domain.FieldError{
	"resources_id_check":                  {Field: "id", Msg: "must be a UUID in lowercase"},
	"resources_state_check":               {Field: "state", Msg: "must be JSON"},
	"resources_config_check":              {Field: "config", Msg: "must be JSON"},
	"resources_paused_check":              {Field: "paused", Msg: "must be true or false (1 or 0)"},
	"resources_hibernate_check":           {Field: "hibernate", Msg: "must be true or false (1 or 0)"},
	"resources_times_check":               {Field: "times", Msg: "must be times SQLite reads, e.g. 2026-01-02T03:04:05Z"},
	"resources_unhealthy_since_check":     {Field: "unhealthy_since", Msg: "must be a time SQLite reads, e.g. 2026-01-02T03:04:05Z"},
	"slot_reservations_resource_id_check": {Field: "resource_id", Msg: "must be a UUID in lowercase"},
})

// describeDBError turns a check violation into a *domain.FieldError naming the column; other
// errors are returned unchanged.
func describeDBError(err error) error {
	if errorCode(err) != sqlite3lib.SQLITE_CONSTRAINT_CHECK {
		return err
	}
	for name, fe := range checkMessages {
		if strings.Contains(err.Error(), name) {
			return &fe
		}
	}
	return err
}

// parseID checks id is a UUID and returns it in the stored (lowercase) form; one that is not
// a UUID names no resource.
func parseID(id string) (string, error) {
	u, err := uuidString(id)
	if err != nil {
		return "", fmt.Errorf("resource %q: %w (resource ids are UUIDs)", id, domain.ErrNotFound)
	}
	return u, nil
}

func notFound(id string) error {
	return fmt.Errorf("resource %s: %w", id, domain.ErrNotFound)
}

// IsMissingTable reports whether err comes from a query naming a table the database lacks
// (the schema was never migrated).
func IsMissingTable(err error) bool {
	return errorCode(err) == sqlite3lib.SQLITE_ERROR && strings.Contains(err.Error(), "no such table")
}
