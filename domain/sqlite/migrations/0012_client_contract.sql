-- 0012: the SQLite dialect of the PostgreSQL migration of the same name, as far as SQLite can
-- hold it. SQLite has no roles: every process that can write the file (the agent, the CLI,
-- the sqlite3 shell) writes it with the same rights, and any of them could drop a trigger.
-- So the column guards and the owner isolation of PostgreSQL have no SQLite form; what
-- holds here is the rule that binds every writer alike:
--
--   * no writer moves a row out of 'deleting': a delete requested is carried out
--     (resources_deleting_final).

CREATE TRIGGER resources_deleting_final
    BEFORE UPDATE OF status ON resources
    WHEN OLD.status = 'deleting' AND NEW.status <> 'deleting'
BEGIN
    SELECT RAISE(ABORT, 'the resource is being deleted: its status stays deleting until the agent has deprovisioned it and removed the row; create the resource again afterwards');
END;
