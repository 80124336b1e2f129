-- 0019: the shared rate budgets of brokers. A provisioner whose spec sets a budget (for
-- Kubernetes: API requests per second and a burst) has one token bucket here, which every
-- agent draws from, so that all of them together stay within it:
--
--   * rate, burst: tokens gained a second and the most the bucket holds, as the last draw
--     gave them (every draw carries its agent's spec);
--   * tokens: what the bucket held at refreshed_at, a fraction of a token included;
--   * refreshed_at: the database clock at the last draw; a draw first adds
--     rate * (now - refreshed_at) tokens, up to burst, then takes whole tokens;
--   * granted: how many tokens the last draw took (what the draw's RETURNING reads);
--   * draws: how many draws the bucket has served, to measure what the budget costs.
--
-- A bucket is created full by its first draw; rows are never deleted (a provisioner gone
-- from the set leaves one small row). Agents write it; clients may read it (0012).

CREATE TABLE broker_budgets (
    provisioner  text PRIMARY KEY,
    rate         double precision NOT NULL CHECK (rate > 0),
    burst        integer NOT NULL CHECK (burst >= 1),
    tokens       double precision NOT NULL CHECK (tokens >= 0),
    refreshed_at timestamptz NOT NULL,
    granted      integer NOT NULL DEFAULT 0,
    draws        bigint NOT NULL DEFAULT 0
);
