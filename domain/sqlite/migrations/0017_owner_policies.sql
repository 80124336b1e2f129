-- 0017: the SQLite dialect of the PostgreSQL migration of the same name: the owners'
-- policies, for fair queueing between owners. An owner with no row has weight 1 and the
-- default class.
--
--   * weight: the owner's share of the agent's work while several owners have work waiting;
--   * class: the label the owner's queued work is counted under in the agent's metrics
--     ('' is the default class): up to 32 lower-case letters, digits and dashes;
--   * updated_at: the database clock at the last write, in the stored time form.

CREATE TABLE owner_policies (
    owner      TEXT PRIMARY KEY CHECK (owner <> ''),
    weight     INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    class      TEXT NOT NULL DEFAULT '' CHECK (length(class) <= 32 AND class NOT GLOB '*[^a-z0-9-]*'),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
