-- 0006: the agents sharing the store. Each agent registers at start, heartbeats while it
-- runs and removes its row when it stops; an agent is live while its last heartbeat is
-- younger than the agents' ttl, on the database clock.
--
--   * session: starts anew at each registration of the id, greater than every earlier
--     session of the id (it is at least the database clock in milliseconds), so a process
--     that lost its registration to a newer one of the same id can tell;
--   * started_at, heartbeat_at: the database clock at registration and at the last
--     heartbeat;
--   * version, http_addr: the Berth release the agent runs and where it serves its HTTP
--     endpoints.
--
-- The index on the resources' lease holders serves what counts and clears an agent's leases.

CREATE TABLE agents (
    id           text PRIMARY KEY,
    session      bigint NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    version      text NOT NULL DEFAULT '',
    http_addr    text NOT NULL DEFAULT ''
);

CREATE INDEX resources_lease_holder_idx ON resources (lease_holder) WHERE lease_holder IS NOT NULL;
