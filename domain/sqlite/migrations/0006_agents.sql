-- 0006: the agents sharing the store. The SQLite dialect of the PostgreSQL migration of the
-- same name (an SQLite file serves one agent, but the table and its rules are the same):
-- each agent registers at start, heartbeats while it runs and removes its row when it
-- stops; an agent is live while its last heartbeat is younger than the agents' ttl, on the
-- database clock.
--
--   * session: starts anew at each registration of the id, greater than every earlier
--     session of the id (it is at least the database clock in milliseconds);
--   * started_at, heartbeat_at: the database clock at registration and at the last
--     heartbeat, in the stored time form;
--   * version, http_addr: the Berth release the agent runs and where it serves its HTTP
--     endpoints.
--
-- The index on the resources' lease holders serves what counts and clears an agent's leases.

CREATE TABLE agents (
    id           TEXT PRIMARY KEY,
    session      INTEGER NOT NULL,
    started_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    heartbeat_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    version      TEXT NOT NULL DEFAULT '',
    http_addr    TEXT NOT NULL DEFAULT ''
);

CREATE INDEX resources_lease_holder_idx ON resources (lease_holder) WHERE lease_holder IS NOT NULL;
