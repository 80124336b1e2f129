package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/juju/clock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// Type is the provisioner type of the environ.
const Type = "postgres"

// readyPoll is how often AwaitReady tries the role's login again.
const readyPoll = 250 * time.Millisecond

// The state keys the environ saves.
const (
	stateDatabase    = "database"
	stateConnections = "connections"
	stateHibernated  = "hibernated"
)

type pgEnviron struct {
	name   string
	spec   *Spec
	logger *slog.Logger
	clock  clock.Clock
	// resources reads a row again before a check repairs anything; nil where no database
	// is at hand (check-config), and then a repair goes ahead.
	resources environ.ResourceGetter
	// work runs the environ's statements; locks holds the resources' advisory locks, one
	// transaction each, for as long as the work on them runs. Two pools, so that a
	// connection holding a lock never waits for one that holds another.
	work, locks *pgxpool.Pool
	// login is the admin connection's config, to copy for a role's login check.
	login *pgx.ConnConfig
	// host and port are what clients are told.
	host string
	port int
}

var (
	_ environ.Environ          = (*pgEnviron)(nil)
	_ environ.Hibernator       = (*pgEnviron)(nil)
	_ environ.Sizer            = (*pgEnviron)(nil)
	_ environ.CapacityReporter = (*pgEnviron)(nil)
)

// New builds a postgres environ named name from its JSON spec. It reads the admin DSN the
// spec refers to but does not connect: the first call does.
func New(name string, raw json.RawMessage, deps environ.Deps) (environ.Environ, error) {
	spec, err := ParseSpec(raw)
	if err != nil {
		return nil, err
	}
	cfg, err := spec.poolConfig()
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(spec.AdminConnections)
	cfg.MinConns = 0
	lockCfg := cfg.Copy()
	// Neither pool connects yet; their errors are of the config, whose text may quote
	// the DSN, so they are not passed on.
	work, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, errors.New("the admin DSN cannot be used to open a connection pool: check its options")
	}
	locks, err := pgxpool.NewWithConfig(context.Background(), lockCfg)
	if err != nil {
		work.Close()
		return nil, errors.New("the admin DSN cannot be used to open a connection pool: check its options")
	}
	e := &pgEnviron{
		name: name, spec: spec, logger: deps.Logger, clock: deps.Clock, resources: deps.Resources,
		work: work, locks: locks, login: cfg.ConnConfig.Copy(),
		host: spec.Host, port: spec.Port,
	}
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	if e.clock == nil {
		e.clock = clock.WallClock
	}
	if e.host == "" {
		e.host = cfg.ConnConfig.Host
	}
	if e.port == 0 {
		e.port = int(cfg.ConnConfig.Port)
	}
	return e, nil
}

func (e *pgEnviron) Type() string { return Type }

func (e *pgEnviron) Supports(t domain.ResourceType) bool { return t == Name }

// Summary describes the provisioner for check-config.
func (e *pgEnviron) Summary() string {
	return fmt.Sprintf("databases on %s:%d, names %s*, passwords in %s", e.host, e.port, e.spec.NamePrefix, e.spec.PasswordDir)
}

// ResourceSpec is what resources are built from: where clients connect, the password
// files and the bound on their args; not the DSN reference, the admin pools' size or the
// name prefix (a resource keeps the name it was given).
func (e *pgEnviron) ResourceSpec() any {
	return map[string]any{"host": e.host, "port": e.port, "password_dir": e.spec.PasswordDir, "max_connections": e.spec.MaxConnections}
}

// Reconcile makes the role and its database exist as args ask, the role allowed to log in.
func (e *pgEnviron) Reconcile(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if err := e.checkType(r); err != nil {
		return nil, err
	}
	args, err := e.args(opts)
	if err != nil {
		return nil, err
	}
	var repairs []string
	err = e.locked(ctx, r.ID, func(conn *pgxpool.Conn) error {
		repairs, err = e.converge(ctx, conn, r, args.Connections, true)
		return err
	})
	if err != nil {
		return nil, e.fail(r, "reconcile", err)
	}
	return e.result(r, args.Connections, false, repairs), nil
}

// AwaitReady tries the role's login on its database until it works or ctx ends.
func (e *pgEnviron) AwaitReady(ctx context.Context, r *environ.Resource) error {
	name := e.nameOf(r)
	for {
		err := e.tryLogin(ctx, name)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return e.fail(r, "await login", fmt.Errorf("%w (last try: %v)", ctx.Err(), err))
		case <-e.clock.After(readyPoll):
		}
	}
}

// Deprovision takes the role's login, ends its sessions and drops its database, the role
// and its password file. What is gone already is a success.
func (e *pgEnviron) Deprovision(ctx context.Context, r *environ.Resource) error {
	name := e.nameOf(r)
	err := e.locked(ctx, r.ID, func(conn *pgxpool.Conn) error {
		if _, err := conn.Exec(ctx, setLogin(name, false)); err != nil && !isCode(err, "42704") {
			return fmt.Errorf("revoke the login of %s: %w", name, err)
		}
		if _, err := conn.Exec(ctx, sqlTerminate, name, name); err != nil {
			return fmt.Errorf("end the sessions of %s: %w", name, err)
		}
		if _, err := conn.Exec(ctx, dropDatabase(name)); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		if _, err := conn.Exec(ctx, dropRole(name)); err != nil {
			return fmt.Errorf("drop role %s: %w", name, err)
		}
		return removePasswordFile(e.spec.PasswordDir, name)
	})
	return e.fail(r, "deprovision", err)
}

// Hibernate takes the role's login away and ends its sessions; the database and the
// password stay. A role that is gone is a success: there is nothing to stop.
func (e *pgEnviron) Hibernate(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if err := e.checkType(r); err != nil {
		return nil, err
	}
	args, err := e.args(opts)
	if err != nil {
		return nil, err
	}
	name := e.nameOf(r)
	err = e.locked(ctx, r.ID, func(conn *pgxpool.Conn) error {
		if _, err := conn.Exec(ctx, setLogin(name, false)); err != nil && !isCode(err, "42704") {
			return fmt.Errorf("revoke the login of %s: %w", name, err)
		}
		if _, err := conn.Exec(ctx, sqlTerminate, name, ""); err != nil {
			return fmt.Errorf("end the sessions of %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, e.fail(r, "hibernate", err)
	}
	return e.result(r, args.Connections, true, nil), nil
}

// Check pings the server.
func (e *pgEnviron) Check(ctx context.Context) error {
	if _, err := e.work.Exec(ctx, sqlPing); err != nil {
		return e.fail(nil, "ping the server", err)
	}
	return nil
}

// CheckResource finds what drifted from what Reconcile (or Hibernate) made: the role or
// the database gone, the role's powers, login or limit changed, other roles given access,
// the password file gone or the password changed. It repairs it as they would, once it has
// read the row again and found it unchanged, and reports each repair. A resource without
// drift is healthy when its role can log in to its database (a hibernated one: when it
// cannot).
func (e *pgEnviron) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	if err := e.checkType(r); err != nil {
		return nil, err
	}
	args, err := e.args(opts)
	if err != nil {
		return nil, err
	}
	hibernated := isHibernated(r.State)
	name := e.nameOf(r)
	obs, err := e.observe(ctx, e.work, name)
	if err != nil {
		return nil, e.fail(r, "check", err)
	}
	drifts := obs.drifts(name, args.Connections, !hibernated)
	if len(drifts) == 0 && !hibernated {
		switch err := e.tryLogin(ctx, name); {
		case isCode(err, "28P01"):
			drifts = append(drifts, "password reset from its file: the role's password no longer matched it")
		case errors.Is(err, errNoPasswordFile):
			drifts = append(drifts, "password file re-created: it was missing (a new password)")
		case err != nil:
			return nil, e.fail(r, "check login", err)
		}
	}
	if len(drifts) == 0 {
		return e.result(r, args.Connections, hibernated, nil), nil
	}
	if err := environ.StillCurrent(ctx, e.resources, r, opts.Generation, isHibernated(r.State)); err != nil {
		return nil, err
	}
	err = e.locked(ctx, r.ID, func(conn *pgxpool.Conn) error {
		_, err := e.converge(ctx, conn, r, args.Connections, !hibernated)
		return err
	})
	if err != nil {
		return nil, e.fail(r, "repair", fmt.Errorf("%s: %w", strings.Join(drifts, "; "), err))
	}
	for _, d := range drifts {
		e.logger.Info("repaired drift", "resource", r.ID, "repair", d)
	}
	return e.result(r, args.Connections, hibernated, drifts), nil
}

// Units is the resource's connection limit: an owner's quota on the provisioner bounds
// the connections its databases may hold.
func (e *pgEnviron) Units(_ *environ.Resource, opts *environ.ResourceOptions) (int64, error) {
	args, err := e.args(opts)
	if err != nil {
		return 0, err
	}
	return int64(args.Connections), nil
}

// Capacity reports the server's connections (those not reserved for superusers) and the
// connection limits of the provisioner's roles that may log in: limits summing to more
// than the server takes promise connections it cannot give.
func (e *pgEnviron) Capacity(ctx context.Context) (environ.Capacity, error) {
	var total, used int64
	if err := e.work.QueryRow(ctx, sqlCapacity, e.spec.NamePrefix).Scan(&total, &used); err != nil {
		return environ.Capacity{}, e.fail(nil, "read the server's connections", err)
	}
	host := environ.HostCapacity{Host: net.JoinHostPort(e.host, strconv.Itoa(e.port)), Total: total, Used: used}
	return environ.Capacity{Unit: "connections", Total: total, Used: used, Hosts: []environ.HostCapacity{host}}, nil
}

// Close closes the environ's connections.
func (e *pgEnviron) Close() error {
	e.work.Close()
	e.locks.Close()
	return nil
}

// converge makes the role and its database what Reconcile makes, the role's login as
// login says, on conn under the resource's lock, and returns the drift it put right.
func (e *pgEnviron) converge(ctx context.Context, conn *pgxpool.Conn, r *environ.Resource, limit int, login bool) ([]string, error) {
	name := e.nameOf(r)
	provisioned := r.State[stateDatabase] != nil
	obs, err := e.observe(ctx, conn, name)
	if err != nil {
		return nil, err
	}
	var repairs []string
	if provisioned {
		// Drift is judged against what the last attempt made, not what this one asks.
		was, err := environ.WholeNumber("state.connections", r.State[stateConnections], 1, MaxConnections)
		if err != nil {
			was = int64(limit)
		}
		repairs = obs.drifts(name, int(was), !isHibernated(r.State))
	}
	password, created, err := ensurePassword(e.spec.PasswordDir, name)
	if err != nil {
		return nil, err
	}
	if created && provisioned {
		repairs = append(repairs, "password file re-created: it was missing (a new password)")
	}
	verifier, err := scramVerifier(password)
	if err != nil {
		return nil, err
	}
	stmt := createRole(name, login, limit, verifier)
	if obs.role != nil {
		stmt = alterRole(name, login, limit, verifier, obs.role.powers())
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return nil, fmt.Errorf("create or alter role %s: %w", name, err)
	}
	var stmts []string
	switch {
	case obs.db == nil:
		stmts = append(stmts, createDatabase(name, name), revokeDatabase(name, "PUBLIC"), commentDatabase(name, r.ID))
	case obs.db.owner != name:
		stmts = append(stmts, setOwner(name, name))
	}
	if obs.db != nil {
		for _, g := range obs.db.others {
			stmts = append(stmts, revokeDatabase(name, g))
		}
	}
	stmts = append(stmts, grantDatabase(name, name))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("database %s: %w", name, err)
		}
	}
	if obs.db == nil || len(obs.db.others) > 0 {
		if _, err := conn.Exec(ctx, sqlTerminateOthers, name, name); err != nil {
			return nil, fmt.Errorf("end the sessions of other roles on %s: %w", name, err)
		}
	}
	if !login {
		if _, err := conn.Exec(ctx, sqlTerminate, name, ""); err != nil {
			return nil, fmt.Errorf("end the sessions of %s: %w", name, err)
		}
	}
	return repairs, nil
}

// locked runs fn on a connection of the work pool while a transaction of the lock pool
// holds the resource's advisory lock. The work runs outside that transaction because
// CREATE DATABASE and DROP DATABASE cannot run in one; every agent on the server takes
// the same lock, so work on one resource never overlaps however many reconcile it.
func (e *pgEnviron) locked(ctx context.Context, id string, fn func(conn *pgxpool.Conn) error) error {
	tx, err := e.locks.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin the lock's transaction: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, sqlLockTimeout); err != nil {
		return fmt.Errorf("take the resource's lock: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlLock, lockKey(id)); err != nil {
		return fmt.Errorf("take the resource's lock: %w", err)
	}
	conn, err := e.work.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect to the server: %w", err)
	}
	defer conn.Release()
	return fn(conn)
}

// tryLogin connects as role name to its database with the password from its file: what a
// client does.
func (e *pgEnviron) tryLogin(ctx context.Context, name string) error {
	password, err := readPassword(e.spec.PasswordDir, name)
	if err != nil {
		return err
	}
	cfg := e.login.Copy()
	cfg.User, cfg.Password, cfg.Database = name, password, name
	cfg.RuntimeParams = map[string]string{"application_name": "berth-check"}
	cfg.ConnectTimeout = 10 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if isCode(err, "53300") {
		// Every connection its limit allows is in use: the login itself worked.
		return nil
	}
	if err != nil {
		return fmt.Errorf("log in as %s: %w", name, err)
	}
	return conn.Close(ctx)
}

// observed is what the server holds of a resource: its role and its database, nil when
// missing.
type observed struct {
	role *roleRow
	db   *databaseRow
}

type roleRow struct {
	canLogin                                            bool
	connLimit                                           int
	super, createDB, createRole, replication, bypassRLS bool
}

type databaseRow struct {
	owner      string
	canConnect bool
	others     []string // grantees besides the owner, "PUBLIC" for everyone
}

// queryer is a connection or a pool.
type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (e *pgEnviron) observe(ctx context.Context, q queryer, name string) (*observed, error) {
	obs := &observed{}
	var role roleRow
	var limit int32
	err := q.QueryRow(ctx, sqlRole, name).Scan(&role.canLogin, &limit, &role.super, &role.createDB, &role.createRole, &role.replication, &role.bypassRLS)
	switch {
	case err == nil:
		role.connLimit = int(limit)
		obs.role = &role
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("read role %s: %w", name, err)
	}
	var db databaseRow
	var canConnect *bool
	err = q.QueryRow(ctx, sqlDatabase, name, roleOrPublic(obs.role != nil, name)).Scan(&db.owner, &canConnect, &db.others)
	switch {
	case err == nil:
		db.canConnect = canConnect != nil && *canConnect && obs.role != nil
		obs.db = &db
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("read database %s: %w", name, err)
	}
	return obs, nil
}

// roleOrPublic is the role whose CONNECT privilege sqlDatabase reads: the resource's, or
// PUBLIC while the role is missing (has_database_privilege fails on an unknown role).
func roleOrPublic(exists bool, name string) string {
	if exists {
		return name
	}
	return "public"
}

// drifts lists, one line each, how obs differs from what converge makes.
func (obs *observed) drifts(name string, limit int, login bool) []string {
	var out []string
	switch r := obs.role; {
	case r == nil:
		out = append(out, fmt.Sprintf("role %s re-created: it was dropped out of band", name))
	default:
		if p := r.powers(); len(p) > 0 {
			out = append(out, fmt.Sprintf("role %s: %s taken back: it was given more than its database", name, strings.Join(p, " ")))
		}
		if r.canLogin != login {
			out = append(out, fmt.Sprintf("role %s: login set back to %s", name, loginClause(login)))
		}
		if r.connLimit != limit {
			out = append(out, fmt.Sprintf("role %s: connection limit set back to %d from %d", name, limit, r.connLimit))
		}
	}
	switch d := obs.db; {
	case d == nil:
		out = append(out, fmt.Sprintf("database %s re-created empty: it was dropped out of band", name))
	default:
		if d.owner != name {
			out = append(out, fmt.Sprintf("database %s: owner set back to %s from %s", name, name, d.owner))
		}
		if len(d.others) > 0 {
			out = append(out, fmt.Sprintf("database %s: access taken from %s", name, strings.Join(d.others, ", ")))
		}
		if obs.role != nil && !d.canConnect {
			out = append(out, fmt.Sprintf("database %s: CONNECT granted back to %s", name, name))
		}
	}
	return out
}

// powers lists the clauses that take back what the role must not have.
func (r *roleRow) powers() []string {
	var out []string
	for _, p := range []struct {
		has    bool
		clause string
	}{
		{r.super, "NOSUPERUSER"}, {r.createDB, "NOCREATEDB"}, {r.createRole, "NOCREATEROLE"},
		{r.replication, "NOREPLICATION"}, {r.bypassRLS, "NOBYPASSRLS"},
	} {
		if p.has {
			out = append(out, p.clause)
		}
	}
	return out
}

// nameOf is the name of r's database and role: the one its state records, so that a
// change of the spec's name_prefix moves no resource, else objectName.
func (e *pgEnviron) nameOf(r *environ.Resource) string {
	if name, ok := r.State[stateDatabase].(string); ok && name != "" {
		return name
	}
	return e.objectName(r.ID)
}

// objectName is the name of the resource's database and of its role: the prefix and the
// id's 32 hex digits when it is a UUID (as every row's id is), else the prefix, "id_" and
// 24 hex digits of the id's SHA-256, so that any id makes a safe name that no other id
// makes.
func (e *pgEnviron) objectName(id string) string {
	if u, err := uuid.Parse(id); err == nil && u.String() == id {
		return e.spec.NamePrefix + strings.ReplaceAll(id, "-", "")
	}
	sum := sha256.Sum256([]byte(id))
	return e.spec.NamePrefix + "id_" + hex.EncodeToString(sum[:12])
}

func (e *pgEnviron) checkType(r *environ.Resource) error {
	if r.Type != Name {
		return environ.Permanent(fmt.Errorf("provisioner %q is of type %s, which provisions %s resources, not %s: choose a provisioner that supports %s",
			e.name, Type, Name, r.Type, r.Type))
	}
	return nil
}

// args decodes the resource's args and holds them to the spec's bound.
func (e *pgEnviron) args(opts *environ.ResourceOptions) (*Args, error) {
	args, err := DecodeArgs(opts.Args)
	if err != nil {
		return nil, err
	}
	if args.Connections > e.spec.MaxConnections {
		return nil, &domain.FieldError{Field: "args.connections", Msg: fmt.Sprintf("must be at most %d on provisioner %q (its spec's max_connections), got %d", e.spec.MaxConnections, e.name, args.Connections)}
	}
	return args, nil
}

// result is r as provisioned: its state and the config clients reach it with.
func (e *pgEnviron) result(r *environ.Resource, limit int, hibernated bool, repairs []string) *environ.Resource {
	name := e.nameOf(r)
	state := map[string]any{stateDatabase: name, stateConnections: limit}
	if hibernated {
		state[stateHibernated] = true
	}
	cfg := Config{Host: e.host, Port: e.port, Database: name, User: name, PasswordFile: passwordPath(e.spec.PasswordDir, name)}
	return &environ.Resource{ID: r.ID, Type: r.Type, State: state, Config: cfg.AsMap(), Repairs: repairs}
}

func isHibernated(state map[string]any) bool {
	h, _ := state[stateHibernated].(bool)
	return h
}

// fail wraps err with what failed, marks the server's unavailability for the breaker, and
// leaves no secret in the message: the statements carry only a verifier, and pgx's
// connection errors name the user and database, not the password.
func (e *pgEnviron) fail(r *environ.Resource, what string, err error) error {
	if err == nil {
		return nil
	}
	if r != nil {
		err = fmt.Errorf("%s %s: %s: %w", r.Type, r.ID, what, err)
	} else {
		err = fmt.Errorf("provisioner %q: %s: %w", e.name, what, err)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ne) || (errors.As(err, &ce) && !isCode(err, "28000", "28P01", "3D000", "42501", "53300")) {
		return environ.Unavailable(err, environ.UnavailableConnection, "the shared PostgreSQL server cannot be reached", 0)
	}
	return err
}

// isCode reports whether err is a PostgreSQL error of one of the SQLSTATE codes.
func isCode(err error, codes ...string) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	for _, c := range codes {
		if pe.Code == c {
			return true
		}
	}
	return false
}
