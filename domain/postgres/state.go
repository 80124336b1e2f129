package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
	"github.com/berth-dev/berth/domain/internal/dburl"
)

// State is domain.State on a PostgreSQL connection pool.
type State struct {
	pool *pgxpool.Pool
	// changeLog is a pool of one connection of its own for the change log's reads, which
	// wake every reconcile: on pool, under a burst, they queued for a connection behind
	// the reconciles' transactions (see the "Connections" part of the package doc).
	changeLog *pgxpool.Pool
	// claims and progress run the claims and progress records of concurrent reconciles
	// together: one round trip and one commit for all queued meanwhile (see groups.go).
	claims   *backend.Group[*claimCall]
	progress *backend.Group[*progressCall]
	// reads runs concurrent GetResource calls together, in one statement (see reads.go).
	reads *backend.Group[*readCall]
	// reserve holds a group per provisioner: its reservations share one hold of its lock.
	reserveMu sync.Mutex
	reserve   map[string]*backend.Group[*reserveCall]
	// instant holds a group per provisioner of the reservations that provision their
	// resources whole (domain.InstantProvision).
	instant map[string]*instantGroups
	// changed keeps the rows read with the change log until their reconciles take them.
	changed changedRows
	// schema is the schema version this build knows: the fenced writes apply only while
	// the database's is no newer.
	schema int
	// warm is whether the pool warms its connections (PoolConfig.Warm): Migrate warms
	// them again when it changed the schema.
	warm bool
}

var _ domain.State = (*State)(nil)

// PoolConfig tunes the connection pool.
type PoolConfig struct {
	MaxConns int32 // 0: the pool's default
	// Warm opens the main pool's connections ahead (pool_min_conns, unless the URL sets it,
	// is the pool's size) and readies each for the provisions before the pool hands it out
	// (warmProvisions): the agent's pool, whose first write on each connection would
	// otherwise wait for the server to load and plan what it runs.
	Warm bool
	// IdleInTransactionTimeout, when positive, has the server end a session of either pool
	// whose transaction has waited longer than this for its next statement
	// (idle_in_transaction_session_timeout), unless the URL sets that: the transaction is
	// rolled back and its locks are released. It is for the agent's store, whose process may
	// be stopped (a frozen VM, SIGSTOP, a partition that keeps its connections up) between
	// two statements of a transaction: the row locks it holds then would keep every other
	// agent's claim of those rows waiting for as long as it stays stopped, past its leases
	// and its liveness. 0 leaves the server's setting.
	IdleInTransactionTimeout time.Duration
}

// idleInTransactionParam is the server setting PoolConfig.IdleInTransactionTimeout sets.
const idleInTransactionParam = "idle_in_transaction_session_timeout"

// Open connects to the database at rawURL and checks it answers. It does not migrate the
// schema (see Migrate). Its errors show the URL only as dburl shows it: never a password or
// another secret setting, and nothing of a URL that does not parse.
func Open(ctx context.Context, rawURL string, cfg PoolConfig) (*State, error) {
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("pool MaxConns is %d: use 0 for the default or a positive count", cfg.MaxConns)
	}
	if cfg.IdleInTransactionTimeout < 0 {
		return nil, fmt.Errorf("pool IdleInTransactionTimeout is %s: use 0 for the server's setting or a positive duration", cfg.IdleInTransactionTimeout)
	}
	where, err := dburl.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	migrations, err := embeddedMigrations()
	if err != nil {
		return nil, err
	}
	poolCfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, openError(ctx, "parse database URL "+where.String(), parseConfigMessage(err), where, "")
	}
	if cfg.MaxConns > 0 {
		poolCfg.MaxConns = cfg.MaxConns
	}
	settings := slices.Clone(keyedPlansSettings)
	if cfg.IdleInTransactionTimeout > 0 {
		millis := max(cfg.IdleInTransactionTimeout.Milliseconds(), 1)
		settings = append(settings, sessionSetting{idleInTransactionParam, strconv.FormatInt(millis, 10) + "ms"})
	}
	sessionSettings(poolCfg, settings)
	poolCfg.ShouldPing = shouldPing
	logCfg := poolCfg.Copy()
	logCfg.MaxConns, logCfg.MinConns = 1, 0
	schema := backend.KnownVersion(migrations)
	if cfg.Warm {
		warmOnConnect(poolCfg, schema)
	}
	// The password may come from PGPASSWORD or a password file as well as from the URL.
	password := poolCfg.ConnConfig.Password
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, openError(ctx, "connect to database "+where.String(), err.Error(), where, password)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, openError(ctx, "connect to database "+where.String(), err.Error(), where, password)
	}
	changeLog, err := pgxpool.NewWithConfig(ctx, logCfg)
	if err != nil {
		pool.Close()
		return nil, openError(ctx, "connect to database "+where.String(), err.Error(), where, password)
	}
	s := newState(pool, changeLog, schema)
	s.warm = cfg.Warm
	return s, nil
}

// idlePing is how long a connection must have been idle for the pool to ping it before
// handing it out: pgxpool's own default.
const idlePing = time.Second

// noIdlePing marks the context of a connection's acquisition that takes it without the
// idle ping (withoutIdlePing).
type noIdlePing struct{}

// withoutIdlePing marks ctx so that the pool hands out an idle connection without pinging
// it first. Only a caller that runs its work again on another connection when this one
// fails may take it so: the group of one-transaction provisions does (each call then runs
// alone, on a connection the pool pings). In a traced run of one runtime at a time, 15 of
// 1,195 acquisitions there pinged first (the connection on top of the pool being in use
// elsewhere), each waiting about 0.9 ms for the ping's round trip.
func withoutIdlePing(ctx context.Context) context.Context {
	return context.WithValue(ctx, noIdlePing{}, true)
}

// shouldPing is the pool's ShouldPing: a connection idle for longer than idlePing is pinged
// before it is handed out, unless the acquisition's context says otherwise.
func shouldPing(ctx context.Context, p pgxpool.ShouldPingParams) bool {
	if ctx.Value(noIdlePing{}) != nil {
		return false
	}
	return p.IdleDuration > idlePing
}

// newState is the State on pool, with changeLog for the change log's reads, of a build
// that knows schema version schema.
func newState(pool, changeLog *pgxpool.Pool, schema int) *State {
	s := &State{pool: pool, changeLog: changeLog, reserve: make(map[string]*backend.Group[*reserveCall]), instant: make(map[string]*instantGroups), schema: schema}
	s.claims = backend.NewGroup(maxGroup, s.runClaims)
	s.progress = backend.NewGroup(maxGroup, s.runProgress)
	s.reads = backend.NewGroup(maxGroup, s.runReads)
	return s
}

// parseConfigMessage is what pgx says is wrong with a connection string, without the string:
// pgconn's ParseConfigError quotes it, with passwords masked on a best-effort basis only.
func parseConfigMessage(err error) string {
	var parseErr *pgconn.ParseConfigError
	if !errors.As(err, &parseErr) {
		return err.Error()
	}
	bare := *parseErr
	bare.ConnString = ""
	return strings.TrimPrefix(bare.Error(), "cannot parse ``: ")
}

// openError describes a failure to open the database without exposing a secret: pgx's
// errors carry the parsed configuration (password included), so the cause is flattened to
// its scrubbed text and only a context error stays reachable through errors.Is.
func openError(ctx context.Context, what, msg string, where dburl.URL, password string) error {
	msg = where.Scrub(msg)
	if password != "" {
		msg = strings.ReplaceAll(msg, password, dburl.Hidden)
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

// Close closes every connection of the pools.
func (s *State) Close() {
	s.changeLog.Close()
	s.pool.Close()
}

// Pool returns the underlying pool, for tests and benchmarks that need raw SQL.
func (s *State) Pool() *pgxpool.Pool { return s.pool }
