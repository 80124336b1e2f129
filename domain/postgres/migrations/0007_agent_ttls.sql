-- 0007: each agent's row carries its own liveness bound and lease renewal, so every agent
-- and the CLI decide the same way whether a resource lease is still held.
--
--   * ttl_ms: the agent is live while heartbeat_at > now() - ttl_ms. A resource lease held
--     by a registered agent that is not live is void, whatever lease_expires_at says; a
--     lease whose holder has no row keeps the rule of lease_expires_at alone;
--   * lease_ttl_ms: each heartbeat renews the agent's resource leases to now() + this (0:
--     none), so a lease holds as long as its agent heartbeats.
--
-- Rows registered before this migration get the default agent ttl and no renewal.

ALTER TABLE agents ADD COLUMN ttl_ms bigint NOT NULL DEFAULT 15000;
ALTER TABLE agents ADD COLUMN lease_ttl_ms bigint NOT NULL DEFAULT 0;
