-- 0020: the SQLite dialect of the PostgreSQL migration of the same name: each provisioner's
-- circuit breaker (domain.Breaker). Times are in the stored form; NULL where the breaker
-- has none.

CREATE TABLE broker_breakers (
    provisioner       TEXT PRIMARY KEY,
    state             TEXT NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half-open')),
    failures          INTEGER NOT NULL DEFAULT 0,
    window_started_at TEXT,
    opened_at         TEXT,
    next_probe_at     TEXT,
    probe_holder      TEXT NOT NULL DEFAULT '',
    probe_until       TEXT,
    last_error        TEXT NOT NULL DEFAULT '',
    open_count        INTEGER NOT NULL DEFAULT 0,
    updated_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
