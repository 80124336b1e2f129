package postgres

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-dev/berth/domain"
)

// State is domain.State on a PostgreSQL connection pool.
type State struct {
	pool *pgxpool.Pool
}

var _ domain.State = (*State)(nil)

// PoolConfig tunes the connection pool.
type PoolConfig struct {
	MaxConns int32 // 0: the pool's default
}

// Open connects to the database at url and checks it answers. It does not migrate the schema
// (see Migrate). Errors never contain the URL's password.
func Open(ctx context.Context, url string, cfg PoolConfig) (*State, error) {
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("pool MaxConns is %d: use 0 for the default or a positive count", cfg.MaxConns)
	}
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, openError(ctx, "parse database URL "+RedactURL(url), err, "")
	}
	if cfg.MaxConns > 0 {
		poolCfg.MaxConns = cfg.MaxConns
	}
	password := poolCfg.ConnConfig.Password
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, openError(ctx, "connect to database "+RedactURL(url), err, password)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, openError(ctx, "connect to database "+RedactURL(url), err, password)
	}
	return &State{pool: pool}, nil
}

// openError describes a failure to open the database without exposing the password: pgx's
// errors carry the parsed configuration (password included), so the cause is flattened to
// its redacted text and only a context error stays reachable through errors.Is.
func openError(ctx context.Context, what string, err error, password string) error {
	msg := err.Error()
	if password != "" {
		msg = strings.ReplaceAll(msg, password, "xxxxx")
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %s: %w", what, msg, ctxErr)
	}
	return fmt.Errorf("%s: %s (check the host, port, user, password and database in the URL)", what, msg)
}

// Ping checks the database answers.
func (s *State) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// Close closes every connection of the pool.
func (s *State) Close() { s.pool.Close() }

// Pool returns the underlying pool, for tests and benchmarks that need raw SQL.
func (s *State) Pool() *pgxpool.Pool { return s.pool }

var (
	quotedPasswordKV = regexp.MustCompile(`password\s*=\s*'(?:[^'\\]|\\.)*'`)
	plainPasswordKV  = regexp.MustCompile(`password\s*=\s*[^\s']\S*`)
)

// RedactURL returns the database URL (or key=value connection string) with any password
// replaced by "xxxxx", for logs and errors.
func RedactURL(rawURL string) string {
	if strings.HasPrefix(rawURL, "postgres://") || strings.HasPrefix(rawURL, "postgresql://") {
		u, err := url.Parse(rawURL)
		if err != nil {
			return redactUnparsableURL(rawURL)
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	s := quotedPasswordKV.ReplaceAllLiteralString(rawURL, "password=xxxxx")
	return plainPasswordKV.ReplaceAllLiteralString(s, "password=xxxxx")
}

// redactUnparsableURL drops everything between the scheme and the last '@' of the authority
// (user and password): a URL that does not parse cannot be trusted to split where we expect.
func redactUnparsableURL(rawURL string) string {
	scheme, rest, _ := strings.Cut(rawURL, "://")
	authority, path, hasPath := strings.Cut(rest, "/")
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		authority = "xxxxx@" + authority[i+1:]
	}
	out := scheme + "://" + authority
	if hasPath {
		out += "/" + plainPasswordKV.ReplaceAllLiteralString(path, "password=xxxxx")
	}
	return out
}
