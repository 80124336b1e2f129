-- 0013: each agent's row says which schema version its build knows, so that berth agents
-- shows an agent left behind by a newer build's migration (a rolling update under way, or a
-- rollback): such an agent claims no work and waits to be replaced.
--
--   * schema_version: the newest migration the agent's build embeds; 0 for a row registered
--     by a build from before this migration, which does not say.

ALTER TABLE agents ADD COLUMN schema_version integer NOT NULL DEFAULT 0;
