-- 9000: the one migration of the upgrade test's "newer build" (built with the tag
-- berth_upgrade_test): a schema version no release knows, in SQL both dialects run.
CREATE TABLE upgrade_probe (id integer PRIMARY KEY);
