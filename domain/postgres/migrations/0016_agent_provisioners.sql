-- 0016: each agent's row names the provisioners of its set, so that a client can tell a
-- resource named for a provisioner no live agent serves (berth resource create warns) and
-- berth agents shows which agent serves what.
--
--   * provisioners: the names of the agent's provisioner set, sorted; written by its
--     membership worker when it registers and whenever the set changes (a reload); empty
--     for a row registered by a build from before this migration, which does not say.

ALTER TABLE agents ADD COLUMN provisioners text[] NOT NULL DEFAULT '{}';
