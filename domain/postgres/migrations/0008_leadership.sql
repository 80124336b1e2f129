-- 0008: the leadership lease. One agent at a time runs what must run once (environ checks,
-- orphan sweeps, capacity samples and warnings, change-log and history pruning); the
-- table's single row says which.
--
--   * holder, session: the agent id and the session of its registration that holds it;
--   * acquired_at: the database clock when the holder took it;
--   * expires_at: the database clock after which anyone may take it, unless the holder
--     renews it first. A lease whose holder is a registered agent that is not live is void
--     at once, as its resource leases are.

CREATE TABLE leadership (
    id          integer PRIMARY KEY CHECK (id = 1),
    holder      text NOT NULL,
    session     bigint NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
