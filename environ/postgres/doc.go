// Package postgres is the environ of a shared PostgreSQL server: each resource of type
// postgres is one database and one role of its own on a server the spec names, as Rill's
// clickhousestatic serves ClickHouse databases from a shared cluster.
//
//	{"shared-pg": {"type": "postgres", "spec": {
//	    "dsn_env": "SHARED_PG_DSN",                 // or "dsn_file": "/etc/berth/shared-pg.dsn"
//	    "password_dir": "/var/lib/berth/pg-passwords",
//	    "host": "pg.internal", "port": 5432,        // what clients are told; default: the DSN's
//	    "name_prefix": "berth_", "max_connections": 100, "admin_connections": 8}}}
//
// The admin DSN is given by reference only, an environment variable or a file, so that
// its password is in no spec, row, log line or error; New reads it and checks that it
// parses, and the first call connects. The admin needs CREATEDB and CREATEROLE, and must
// be able to SET ROLE to the roles it creates (a superuser, or on PostgreSQL 16 and newer
// createrole_self_grant = 'set, inherit'), to make them own their databases and to end
// their sessions.
//
// # One resource
//
// The resource's database and role share one name: the spec's name_prefix and the
// resource id's 32 hex digits (berth_0b5c7a4e2f1d4c3b9a8e7d6c5b4a3f21), derived from the id
// alone so that Deprovision finds them with no state, and quoted with pgx's identifier
// sanitising in every statement. The state records the name, and a resource keeps it when
// the spec's prefix changes. Reconcile makes
//
//   - the role: LOGIN, NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS,
//     CONNECTION LIMIT args.connections (default 10, at most the spec's max_connections);
//   - the database, owned by the role (so the role may create in its public schema),
//     with every privilege revoked from PUBLIC and from any other grantee, and CONNECT,
//     TEMPORARY and CREATE granted to the role: the role may use its own database and no
//     other database the environ made. Sessions of other roles (not superusers) that got
//     in while it was open to them, before its REVOKE or while its grants had drifted, are
//     ended. (Databases the environ did not make keep their own grants: revoke CONNECT on
//     them from PUBLIC on a server shared with tenants.)
//   - the password: 32 random bytes in <password_dir>/<name>.password, mode 0600. The
//     server is sent its SCRAM-SHA-256 verifier, never the password, so its statement
//     log holds none either. The password stays as long as the file does; a missing file
//     gets a new password, set on the role by the same reconcile (rotation).
//
// The config is {"host", "port", "database", "user", "password_file"}; the state names the
// database and the connection limit made. Neither holds the password.
//
//	             Reconcile (LOGIN)                 Hibernate
//	(none) ─────────────────────────► ready ──────────────────────► hibernated
//	   ▲                              │  ▲   ALTER ROLE NOLOGIN,      │
//	   │ Deprovision: end sessions,   │  │   end its sessions         │
//	   │ DROP DATABASE ... (FORCE),   │  └────────────────────────────┘
//	   └─ DROP ROLE, remove the file ─┘      Reconcile (wake): LOGIN
//
// A resize (args.connections) is ALTER ROLE ... CONNECTION LIMIT. Hibernate keeps the
// database, the role and the password; waking is Reconcile. What is gone already is a
// success for Deprovision and Hibernate.
//
// # Concurrency
//
// Work on one resource runs under a transaction-scoped advisory lock keyed on its id
// (pg_advisory_xact_lock), so reconciles of one resource by any number of agents on the
// server run one at a time, and each step reads the catalogs before it creates anything.
// CREATE DATABASE and DROP DATABASE cannot run in a transaction block, so the lock's
// transaction is held on one connection (of the lock pool) while the statements run on
// another (of the work pool), each pool admin_connections large: a connection that holds
// a lock never waits for one that holds another. A lock whose agent dies is released
// with its session.
//
// # Drift
//
// CheckResource compares what the server holds with what Reconcile made: the role or the
// database dropped, the role given powers or another login or limit, the database given
// to another owner or opened to PUBLIC or other roles, the password file gone. It then
// logs in as the role, with the file's password, to its database, as a client would (a
// refusal for too many connections counts as a login that works), which also finds a
// password changed out of band. What drifted is repaired under the resource's lock, once
// the row has been read again and found unchanged (otherwise the error wraps
// domain.ErrStale and nothing is repaired), and each repair is one line of the returned
// Repairs. Reconcile repairs the same drift and reports it the same way. A database
// dropped out of band comes back empty; objects the role owned that were reassigned
// before the role was dropped stay with their new owner.
//
// Sizer and CapacityReporter count connections: a resource's size is its connection
// limit (an owner's quota bounds the connections its databases may hold), and the
// capacity is the server's max_connections less those reserved for superusers, used by
// the limits of the provisioner's roles that may log in.
//
// Check pings the server. A server that cannot be reached is environ.Unavailable, for
// the provisioner's circuit breaker.
//
// # The same shape on ClickHouse
//
// A shared ClickHouse server (20.4 and newer: SQL-driven access control) serves resources
// the same way, and clickhouse.go keeps its statements as templates, one per step:
//
//	Reconcile    CREATE USER IF NOT EXISTS u IDENTIFIED WITH sha256_hash BY '<hex>' HOST ANY
//	               DEFAULT DATABASE u SETTINGS max_concurrent_queries_for_user = N READONLY
//	             CREATE DATABASE IF NOT EXISTS u
//	             GRANT ALL ON u.* TO u
//	             ALTER USER u IDENTIFIED WITH sha256_hash BY '<hex>' HOST ANY SETTINGS ...
//	resize       ALTER USER u SETTINGS max_concurrent_queries_for_user = N READONLY
//	Hibernate    ALTER USER u HOST NONE; KILL QUERY WHERE user = 'u' ASYNC
//	wake         ALTER USER u HOST ANY
//	Deprovision  ALTER USER IF EXISTS u HOST NONE; KILL QUERY ...; DROP DATABASE IF EXISTS u;
//	               DROP USER IF EXISTS u
//	CheckResource  system.users, system.databases and system.grants of u
//
// Each may run ON CLUSTER. The differences: no NOLOGIN (HOST NONE instead), a setting
// held READONLY in place of a connection limit, the password sent as its SHA-256 (where
// PostgreSQL gets a SCRAM verifier), and no advisory lock (every statement is guarded
// with IF [NOT] EXISTS, and the agent's lease keeps one attempt per resource at a time).
package postgres
