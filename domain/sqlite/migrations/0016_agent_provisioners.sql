-- 0016: the SQLite dialect of the PostgreSQL migration of the same name: each agent's row
-- names the provisioners of its set, so that a client can tell a resource named for a
-- provisioner no live agent serves.
--
--   * provisioners: a JSON array of the names of the agent's provisioner set, sorted;
--     written by its membership worker when it registers and whenever the set changes; '[]'
--     for a row registered by a build from before this migration, which does not say.

ALTER TABLE agents ADD COLUMN provisioners TEXT NOT NULL DEFAULT '[]';
