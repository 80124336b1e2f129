// Package store opens the store a database URL names: PostgreSQL, the production store and
// the only one several agents can share, or an SQLite file, the embedded store of a
// newcomer's or a small install's single agent. Both implement domain.State with the same
// behaviour (see domain/statetest).
//
// Accepted URLs:
//
//	postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?...]   PostgreSQL (also postgresql://, or
//	host=... dbname=... key=value settings)
//	sqlite:///ABSOLUTE/PATH/berth.db                  an SQLite file by absolute path
//	sqlite://RELATIVE/PATH/berth.db                   ... relative to the working directory
//	file:PATH/berth.db                                ... either
//
// With no URL at all, Berth uses the SQLite file at DefaultPath.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/dburl"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/domain/sqlite"
)

// DB is an open store with the housekeeping the agent and the CLI need.
type DB interface {
	domain.State
	domain.IdentityStore
	// Migrate brings the schema up to date; it is safe to run from several processes at once.
	Migrate(ctx context.Context) error
	// Ping checks the store answers.
	Ping(ctx context.Context) error
}

// Kind is a kind of store.
type Kind string

const (
	Postgres Kind = "postgres"
	SQLite   Kind = "sqlite"
)

// Location is where a database URL points.
type Location struct {
	Kind Kind
	// URL is the URL as given (it may hold a password: show Redact(URL)).
	URL string
	// Path is the absolute path of an SQLite file.
	Path string
}

// String describes the location for logs and messages, without any password.
func (l Location) String() string {
	if l.Kind == SQLite {
		return "SQLite file " + l.Path
	}
	return "PostgreSQL " + Redact(l.URL)
}

// acceptedForms is what an error about a URL Berth cannot use suggests.
const acceptedForms = "use postgres://USER@HOST:PORT/DB (or postgresql://, or host=... dbname=... settings) for PostgreSQL, " +
	"or sqlite:///ABSOLUTE/PATH.db, sqlite://RELATIVE/PATH.db or file:PATH.db for an SQLite file"

// keyValue matches the start of PostgreSQL key=value connection settings.
var keyValue = regexp.MustCompile(`^[A-Za-z_]+\s*=`)

// Parse says which store rawURL names. An SQLite path is made absolute against the working
// directory.
func Parse(rawURL string) (Location, error) {
	s := strings.TrimSpace(rawURL)
	switch {
	case s == "":
		return Location{}, errors.New("no database URL: " + acceptedForms)
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		return postgresLocation(s)
	case strings.HasPrefix(s, "sqlite://"):
		return sqliteLocation(s, strings.TrimPrefix(s, "sqlite://"))
	case strings.HasPrefix(s, "file:"):
		rest := strings.TrimPrefix(s, "file:")
		if strings.HasPrefix(rest, "///") {
			rest = strings.TrimPrefix(rest, "//")
		}
		return sqliteLocation(s, rest)
	case !strings.Contains(s, "://") && keyValue.MatchString(s):
		return postgresLocation(s)
	}
	hint := ""
	if !strings.Contains(s, "://") && !strings.Contains(s, "=") {
		hint = fmt.Sprintf(" (for the SQLite file %s, say sqlite://%s)", s, s)
	}
	return Location{}, fmt.Errorf("database URL %q is not one Berth can use%s: %s", Redact(s), hint, acceptedForms)
}

// postgresLocation refuses a PostgreSQL URL that cannot be shown without a secret: one whose
// parts cannot be told apart for sure would be connected to with a part of its password
// taken for a host or a database, and shown as one.
func postgresLocation(rawURL string) (Location, error) {
	if _, err := dburl.Parse(rawURL); err != nil {
		return Location{}, fmt.Errorf("%w (the URL is not shown, as it may hold a password)", err)
	}
	return Location{Kind: Postgres, URL: rawURL}, nil
}

func sqliteLocation(rawURL, path string) (Location, error) {
	if strings.ContainsAny(path, "?#") {
		return Location{}, fmt.Errorf("database URL %q: an SQLite URL takes a file path only, no ?parameters: %s", Redact(rawURL), acceptedForms)
	}
	unescaped, err := url.PathUnescape(path)
	if err != nil || unescaped == "" {
		return Location{}, fmt.Errorf("database URL %q names no file: %s", Redact(rawURL), acceptedForms)
	}
	abs, err := filepath.Abs(unescaped)
	if err != nil {
		return Location{}, fmt.Errorf("database URL %q: %w", Redact(rawURL), err)
	}
	return Location{Kind: SQLite, URL: rawURL, Path: abs}, nil
}

// Options tunes the store.
type Options struct {
	// MaxConns bounds PostgreSQL's connection pool (0: the pool's default). SQLite ignores it.
	MaxConns int32
	// Logger, when set, is told of an SQLite file that other users can read and, for the
	// agent's store (Warm), of a connection limit of its PostgreSQL role or database below
	// the connections the agent may hold.
	Logger *slog.Logger
	// Warm is for the agent's own store: PostgreSQL's pool opens its connections ahead and
	// readies each for the provisions (postgres.PoolConfig). SQLite ignores it.
	Warm bool
	// IdleInTransactionTimeout, when positive, has PostgreSQL end a session of the store's
	// whose transaction waits longer than this for its next statement, releasing its locks
	// (postgres.PoolConfig). SQLite ignores it: one agent holds its file.
	IdleInTransactionTimeout time.Duration
}

// Open opens the store rawURL names and checks it answers. It does not migrate the schema.
// Errors never contain a password.
func Open(ctx context.Context, rawURL string, opts Options) (DB, error) {
	loc, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if loc.Kind == SQLite {
		st, err := sqlite.Open(ctx, loc.Path)
		if err != nil {
			return nil, err
		}
		if exposed := sqlite.ExposedFiles(loc.Path); len(exposed) > 0 && opts.Logger != nil {
			opts.Logger.Warn("the database file can be read by other users, and it holds every resource's configuration: run chmod 600 on it",
				"files", strings.Join(exposed, " "), "fix", "chmod 600 "+strings.Join(exposed, " "))
		}
		return st, nil
	}
	st, err := postgres.Open(ctx, loc.URL, postgres.PoolConfig{MaxConns: opts.MaxConns, Warm: opts.Warm, IdleInTransactionTimeout: opts.IdleInTransactionTimeout})
	if err != nil {
		return nil, err
	}
	if opts.Warm && opts.Logger != nil {
		warnOfConnectionLimits(ctx, st, opts.Logger)
	}
	return st, nil
}

// warnOfConnectionLimits warns on logger of each connection limit of the agent's role or
// database that is below the connections the agent may hold. Past the limit the server
// refuses the pool's new connections, and the reconciles waiting for them fail under load,
// long after a start that looked fine.
func warnOfConnectionLimits(ctx context.Context, st *postgres.State, logger *slog.Logger) {
	holds := st.AgentConnections()
	below, err := st.ConnectionLimitsBelow(ctx, holds)
	if err != nil {
		logger.Warn("could not check the connection limits of the database and its role", "error", err)
		return
	}
	for _, l := range below {
		logger.Warn("the "+l.Of+"'s connection limit is below the connections this agent may hold (each replica and client of it counts too): raise the limit, or lower pool_max_conns in the database URL",
			l.Of, l.Name, "limit", l.Limit, "agent-connections", holds, "fix", l.Fix(holds))
	}
}

// LockAgent makes sure this process is the only agent on the store rawURL names for as long
// as it holds the lock, and returns the function that releases it. An SQLite file serves one
// agent: a second one gets an error saying which process runs the first. PostgreSQL serves
// any number, so there it locks nothing.
func LockAgent(rawURL string) (release func() error, err error) {
	loc, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if loc.Kind != SQLite {
		return func() error { return nil }, nil
	}
	lock, err := sqlite.LockAgent(loc.Path)
	if err != nil {
		return nil, err
	}
	return lock.Release, nil
}

// Redact returns what logs, errors and CLI output show of a database URL: its scheme, user,
// hosts and ports, database and the settings known to hold no secret, with the password and
// every other setting's value as xxxxx; an SQLite URL's file path; a placeholder for a URL
// that does not parse.
func Redact(rawURL string) string { return dburl.Redact(rawURL) }

// DefaultPath returns the SQLite file Berth uses when it is given no database URL:
// $XDG_STATE_HOME/berth/berth.db, or ~/.local/state/berth/berth.db when XDG_STATE_HOME is
// unset (or not absolute). It creates the directory.
func DefaultPath() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no home directory for the default database (%w): pass --database-url or set BERTH_DATABASE_URL, e.g. sqlite:///var/lib/berth/berth.db", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	dir = filepath.Join(dir, "berth")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create the directory of the default database: %w (pass --database-url or set BERTH_DATABASE_URL to use another)", err)
	}
	return filepath.Join(dir, "berth.db"), nil
}

// DefaultURL is the sqlite:// URL of DefaultPath.
func DefaultURL() (string, error) {
	path, err := DefaultPath()
	if err != nil {
		return "", err
	}
	return "sqlite://" + (&url.URL{Path: path}).EscapedPath(), nil
}

// MissingSchema reports whether err comes from a query against a database without Berth's
// tables (one never migrated).
func MissingSchema(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "42P01" // undefined_table
	}
	return sqlite.IsMissingTable(err)
}
