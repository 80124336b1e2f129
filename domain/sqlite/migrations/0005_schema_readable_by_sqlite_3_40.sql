-- 0005: the schema is readable by SQLite 3.40, the sqlite3 shell of Debian 12 and the
-- sqlite3 module of most Pythons. Before 3.47, RAISE takes a string literal only: a schema
-- holding RAISE(ABORT, '...' || ...) is "malformed" to those readers, which then cannot run
-- even a SELECT on the file. The one trigger that built its message is created again with a
-- constant message naming the column and the rule; the rule itself is unchanged. (The
-- PostgreSQL migration of the same name changes nothing: its message keeps the resource and
-- the two provisioners.)

DROP TRIGGER resources_provisioner_fixed;

-- Moving a resource to another provisioner once something may have been provisioned for it
-- would leak what the old one holds; before that, it is how a client fixes a resource that
-- named an unknown provisioner.
CREATE TRIGGER resources_provisioner_fixed
    BEFORE UPDATE OF provisioner ON resources
    WHEN OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner
     AND (OLD.status NOT IN ('pending', 'error') OR OLD.observed_generation > 0 OR json(OLD.state) <> '{}')
BEGIN
    SELECT RAISE(ABORT, 'provisioner cannot change once provisioning started (the resource left pending or error, or has state): delete the resource and create it again');
END;
