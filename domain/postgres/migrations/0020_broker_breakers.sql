-- 0020: each provisioner's circuit breaker, shared by every agent: repeated failures of its
-- broker (429, 5xx, timeouts, refused connections) open it, and no agent calls the broker
-- until one agent's probe, at next_probe_at, finds it answering again (domain.Breaker).
--
--   * state: closed, open or half-open (the probe of probe_holder is under way, until
--     probe_until);
--   * failures: the failures counted since window_started_at;
--   * opened_at, next_probe_at: when it last opened, and when one agent may probe;
--   * last_error: a short text of the last failure, never a URL or a credential;
--   * open_count: how many times it opened since it last closed (its open time doubles).
--
-- Clients may read it (berth capacity shows it); only the agent writes it.

CREATE TABLE broker_breakers (
    provisioner       text PRIMARY KEY,
    state             text NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half-open')),
    failures          integer NOT NULL DEFAULT 0,
    window_started_at timestamptz,
    opened_at         timestamptz,
    next_probe_at     timestamptz,
    probe_holder      text NOT NULL DEFAULT '',
    probe_until       timestamptz,
    last_error        text NOT NULL DEFAULT '',
    open_count        integer NOT NULL DEFAULT 0,
    updated_at        timestamptz NOT NULL DEFAULT now()
);
