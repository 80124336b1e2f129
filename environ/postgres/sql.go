package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Every statement the environ sends to the shared server is in this file. Identifiers are
// quoted with pgx's Identifier.Sanitize; values travel as bind parameters, except where
// PostgreSQL takes none (utility statements: CREATE/ALTER ROLE, CREATE DATABASE, GRANT),
// and there the only value is a password verifier, a connection limit or a comment, which
// literal quotes.

// sqlLock takes the resource's advisory lock for the enclosing transaction. The key is a
// 64-bit hash of the text, so every agent on the server (whatever its provisioner name)
// serialises its work on one resource; the transaction holds no other lock and turns off
// the idle-in-transaction timeout, which would otherwise drop the lock while the work runs
// on the other connection.
const (
	sqlLockTimeout = `SET LOCAL idle_in_transaction_session_timeout = 0`
	sqlLock        = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`
)

// lockKey is the text sqlLock hashes for resource id.
func lockKey(id string) string { return "berth/postgres/" + id }

// sqlRole reads what the environ manages of role $1: whether it may log in, its connection
// limit and the attributes a tenant role must not have.
const sqlRole = `SELECT rolcanlogin, rolconnlimit, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls
FROM pg_roles WHERE rolname = $1`

// sqlDatabase reads database $1: its owner, whether role $2 may connect to it and the other
// grantees of any privilege on it. A NULL datacl means the built-in default, under which
// PUBLIC may connect: it is reported as PUBLIC.
const sqlDatabase = `SELECT pg_get_userbyid(d.datdba),
  has_database_privilege($2::name, d.oid, 'CONNECT'),
  COALESCE((SELECT array_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END)
            FROM aclexplode(d.datacl) a WHERE a.grantee <> d.datdba),
           CASE WHEN d.datacl IS NULL THEN ARRAY['PUBLIC'] ELSE ARRAY[]::text[] END)
FROM pg_database d WHERE d.datname = $1`

// sqlTerminate ends every session of role $1 and every session on database $2, and counts
// them. Its own session is neither.
const sqlTerminate = `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE (usename = $1 OR datname = $2) AND pid <> pg_backend_pid()`

// sqlTerminateOthers ends the sessions on database $1 of every role but $2 and the
// superusers: those that connected while the database was open to them (between CREATE
// DATABASE and its REVOKE, or while its grants had drifted) and could no longer.
const sqlTerminateOthers = `SELECT count(pg_terminate_backend(a.pid)) FROM pg_stat_activity a JOIN pg_roles r ON r.oid = a.usesysid
WHERE a.datname = $1 AND r.rolname <> $2 AND NOT r.rolsuper AND a.pid <> pg_backend_pid()`

// sqlCapacity reads the connections the server takes from roles that are not superusers,
// and the connection limits of the roles named with prefix $1 that may log in.
const sqlCapacity = `SELECT current_setting('max_connections')::bigint - current_setting('superuser_reserved_connections')::bigint,
  COALESCE((SELECT sum(rolconnlimit) FROM pg_roles WHERE starts_with(rolname, $1) AND rolcanlogin AND rolconnlimit > 0), 0)::bigint`

// sqlPing is the environ's health check.
const sqlPing = `SELECT 1`

// createRole creates a tenant role: login as asked, none of the powers over the server,
// inheriting only what its database.s ownership gives (pg_database_owner owns the public schema), at most limit connections, with the password verifier given.
func createRole(role string, login bool, limit int, verifier string) string {
	return fmt.Sprintf("CREATE ROLE %s WITH %s NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT NOREPLICATION CONNECTION LIMIT %d PASSWORD %s",
		ident(role), loginClause(login), limit, literal(verifier))
}

// alterRole sets the role's login, connection limit and password, and takes back each
// power in revoke: only the powers the role has are named, since a server refuses an admin
// without superuser any mention of some (REPLICATION, BYPASSRLS).
func alterRole(role string, login bool, limit int, verifier string, revoke []string) string {
	clauses := append([]string{loginClause(login), fmt.Sprintf("CONNECTION LIMIT %d", limit)}, revoke...)
	clauses = append(clauses, "PASSWORD "+literal(verifier))
	return fmt.Sprintf("ALTER ROLE %s WITH %s", ident(role), strings.Join(clauses, " "))
}

// setLogin grants or revokes the role's login and nothing else (hibernate).
func setLogin(role string, login bool) string {
	return fmt.Sprintf("ALTER ROLE %s WITH %s", ident(role), loginClause(login))
}

// createDatabase creates the database owned by its role. It cannot run in a transaction
// block: the environ runs it on its own, outside the lock's transaction.
func createDatabase(database, owner string) string {
	return fmt.Sprintf("CREATE DATABASE %s OWNER %s", ident(database), ident(owner))
}

// setOwner gives the database back to its role.
func setOwner(database, owner string) string {
	return fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", ident(database), ident(owner))
}

// revokeDatabase takes every privilege on the database from grantee ("PUBLIC" or a role).
func revokeDatabase(database, grantee string) string {
	g := "PUBLIC"
	if grantee != "PUBLIC" {
		g = ident(grantee)
	}
	return fmt.Sprintf("REVOKE ALL ON DATABASE %s FROM %s", ident(database), g)
}

// grantDatabase gives the role what it needs of its database, also where an owner's
// implicit privileges were revoked out of band.
func grantDatabase(database, role string) string {
	return fmt.Sprintf("GRANT CONNECT, TEMPORARY, CREATE ON DATABASE %s TO %s", ident(database), ident(role))
}

// commentDatabase records which resource the database belongs to, for the server's
// operators (psql's \l+ shows it).
func commentDatabase(database, id string) string {
	return fmt.Sprintf("COMMENT ON DATABASE %s IS %s", ident(database), literal("berth resource "+id))
}

// dropDatabase drops the database, ending its sessions first (WITH (FORCE), PostgreSQL 13
// and newer); a database that is gone is a success.
func dropDatabase(database string) string {
	return fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", ident(database))
}

// dropRole drops the role; a role that is gone is a success.
func dropRole(role string) string {
	return fmt.Sprintf("DROP ROLE IF EXISTS %s", ident(role))
}

func loginClause(login bool) string {
	if login {
		return "LOGIN"
	}
	return "NOLOGIN"
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes s as a standard SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
