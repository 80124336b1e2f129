-- 0008: the SQLite dialect of the PostgreSQL migration of the same name: the leadership
-- lease, one row naming the agent that runs what must run once. A file has one agent, which
-- takes it at its first claim.

CREATE TABLE leadership (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    holder      TEXT NOT NULL,
    session     INTEGER NOT NULL,
    acquired_at TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
