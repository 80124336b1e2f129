-- 0019: the SQLite dialect of the PostgreSQL migration of the same name: the shared rate
-- budgets of brokers, one token bucket per provisioner whose spec sets a budget.
--
--   * rate, burst: tokens gained a second and the most the bucket holds, as the last draw
--     gave them;
--   * tokens: what the bucket held at refreshed_at, a fraction of a token included;
--   * refreshed_at: the database clock at the last draw, in the stored time form (UTC,
--     milliseconds); a draw first adds rate * (now - refreshed_at) tokens, up to burst,
--     then takes whole tokens;
--   * granted: how many tokens the last draw took; draws: how many draws it served.

CREATE TABLE broker_budgets (
    provisioner  TEXT PRIMARY KEY,
    rate         REAL NOT NULL CHECK (rate > 0),
    burst        INTEGER NOT NULL CHECK (burst >= 1),
    tokens       REAL NOT NULL CHECK (tokens >= 0),
    refreshed_at TEXT NOT NULL,
    granted      INTEGER NOT NULL DEFAULT 0,
    draws        INTEGER NOT NULL DEFAULT 0
);
