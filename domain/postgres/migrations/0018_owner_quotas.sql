-- 0018: owner quotas. An operator caps what an owner holds on a provisioner; the agent admits
-- a resource against its owner's quota before its broker provisions (or grows) it.
--
--   * owner_quotas: one row per (owner, provisioner) with a cap; max_resources caps how many
--     of the owner's resources the provisioner holds, max_slots the sum of their units (the
--     environ's own unit: a runtime's slots); NULL leaves that measure uncapped. Only the
--     agent's role writes it (clients get SELECT, see 0012): `berth quota set` runs as the
--     agent. A quota below the owner's usage is allowed: nothing is evicted, and new
--     admissions wait until the usage drops below it;
--   * resources.admitted_provisioner and admitted_units: the provisioner and the units the
--     agent admitted the resource at (NULL: not admitted). The owner's usage on a
--     provisioner is the count and sum of its admitted rows: an admission lasts until the
--     row is removed, and a shrink the broker applied lowers it. Only the agent writes them.

CREATE TABLE owner_quotas (
    owner         text NOT NULL,
    provisioner   text NOT NULL,
    max_resources integer CHECK (max_resources >= 0),
    max_slots     bigint CHECK (max_slots >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, provisioner)
);

ALTER TABLE resources ADD COLUMN admitted_provisioner text,
                      ADD COLUMN admitted_units bigint;

-- The usage of one owner on one provisioner, read under the quota row's lock.
CREATE INDEX resources_admitted_idx ON resources (owner, admitted_provisioner) INCLUDE (admitted_units)
    WHERE admitted_units IS NOT NULL;

-- A client may not write an admission: its WHEN clauses keep the function off every other
-- write (the agent's included), so it costs nothing on the hot path.
CREATE FUNCTION berth_resources_authorize_admission() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    owner oid;
BEGIN
    SELECT c.relowner INTO owner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID;
    IF pg_catalog.pg_has_role(current_user, owner, 'USAGE') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'columns "admitted_provisioner" and "admitted_units" of resources are written by the Berth agent only (role % is a client)', current_user
        USING ERRCODE = 'insufficient_privilege', COLUMN = 'admitted_units', TABLE = 'resources',
              HINT = 'the agent admits resources against owner quotas (berth quota)';
END
$$;

CREATE TRIGGER resources_authorize_admission_insert BEFORE INSERT ON resources
    FOR EACH ROW WHEN (NEW.admitted_provisioner IS NOT NULL OR NEW.admitted_units IS NOT NULL)
    EXECUTE FUNCTION berth_resources_authorize_admission();

CREATE TRIGGER resources_authorize_admission_update BEFORE UPDATE OF admitted_provisioner, admitted_units ON resources
    FOR EACH ROW WHEN (NEW.admitted_provisioner IS DISTINCT FROM OLD.admitted_provisioner
                       OR NEW.admitted_units IS DISTINCT FROM OLD.admitted_units)
    EXECUTE FUNCTION berth_resources_authorize_admission();

-- Owner isolation (0012) covers quotas as it covers resources: a client role sees the quotas
-- of the owners granted to it. The row security is turned with the others' (berth access
-- isolation), and on here already when the database has it on.
CREATE POLICY owner_quotas_owner_isolation ON owner_quotas
    USING (owner IN (SELECT g.owner FROM berth_owner_grants g WHERE g.role_name = current_user));

DO $$
BEGIN
    IF (SELECT c.relrowsecurity FROM pg_catalog.pg_class c WHERE c.oid = 'resources'::regclass) THEN
        ALTER TABLE owner_quotas ENABLE ROW LEVEL SECURITY;
    END IF;
END
$$;
