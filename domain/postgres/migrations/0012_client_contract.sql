-- 0012: the client contract. The role that owns Berth's tables is the agent's; any other role
-- is a client, with the rights `berth migrate --client-role NAME` grants it (SELECT on every
-- table, INSERT, UPDATE and DELETE on resources only). The triggers hold the contract for
-- every writer, whatever its grants:
--
--   * a client writes the desired state and the controls only: on INSERT type, name, owner,
--     provisioner, args, labels, paused, hibernate and retry_requested_at (and id); on UPDATE
--     args, labels, provisioner (while the trigger of 0001 allows it), paused, hibernate and
--     retry_requested_at. A client's write of any other column (status and its message,
--     state, config, generations, retry bookkeeping, leases, the agent's timestamps, and id,
--     type, name and owner once the row exists) is refused with SQLSTATE 42501
--     (insufficient_privilege) naming the column. Its one status write is a delete request
--     (status 'deleting', message 'delete requested'), which is what its DELETE becomes;
--   * no writer moves a row out of 'deleting': a delete requested is carried out;
--   * only the agent removes a row without deprovisioning it (SET LOCAL berth.finalizing =
--     'on'): a client's finalizing DELETE is refused;
--   * the triggers that write the change log and the history run as the tables' owner
--     (SECURITY DEFINER, with search_path pinned to this schema), so a client needs no
--     right on change_log or resource_events, and cannot shadow them with tables of its own.
--
-- Owner isolation (off until `berth access isolation on`): berth_owner_grants maps a client
-- role to the owners it acts for; with row-level security enabled on resources and
-- resource_events, a client sees, writes and deletes the rows of those owners only. The
-- agent owns the tables and is not subject to it.

-- Runs first of the resources' BEFORE triggers (they fire in name order), so it sees the
-- columns as the writer set them, before the other triggers keep theirs.
--
-- The writer acts as the agent when its role is the table's owner, a member of the owner's
-- role, or a superuser. Every name is qualified: the function runs with the caller's
-- search_path, and a client's temporary table must not stand in for pg_class. The lookup is
-- written inline rather than in a function of its own: it runs on every write of the agent,
-- and a plan PL/pgSQL keeps costs a fraction of a SQL function's call.
CREATE FUNCTION berth_resources_authorize_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    col   text;
    owner oid;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = 'deleting' AND NEW.status <> 'deleting' THEN
        RAISE EXCEPTION 'resource % is being deleted: its status stays deleting until the agent has deprovisioned it and removed the row; create the resource again afterwards', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'resources_deleting_final';
    END IF;
    SELECT c.relowner INTO owner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID;
    IF pg_catalog.pg_has_role(current_user, owner, 'USAGE') THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        col := CASE
            WHEN NEW.status <> 'pending' THEN 'status'
            WHEN NEW.status_message <> '' THEN 'status_message'
            WHEN NEW.state <> '{}'::jsonb THEN 'state'
            WHEN NEW.config <> '{}'::jsonb THEN 'config'
            WHEN NEW.generation <> 1 THEN 'generation'
            WHEN NEW.observed_generation <> 0 THEN 'observed_generation'
            WHEN NEW.attempts <> 0 THEN 'attempts'
            WHEN NEW.next_attempt_at IS NOT NULL THEN 'next_attempt_at'
            WHEN NEW.last_error <> '' THEN 'last_error'
            WHEN NEW.lease_holder IS NOT NULL THEN 'lease_holder'
            WHEN NEW.lease_expires_at IS NOT NULL THEN 'lease_expires_at'
            WHEN NEW.lease_token <> 0 THEN 'lease_token'
            WHEN NEW.ready_at IS NOT NULL THEN 'ready_at'
            WHEN NEW.unhealthy_since IS NOT NULL THEN 'unhealthy_since'
            WHEN NEW.created_at <> now() THEN 'created_at'
            WHEN NEW.updated_at <> now() THEN 'updated_at'
            WHEN NEW.status_changed_at <> now() THEN 'status_changed_at'
        END;
    ELSE
        col := CASE
            WHEN NEW.id IS DISTINCT FROM OLD.id THEN 'id'
            WHEN NEW.type IS DISTINCT FROM OLD.type THEN 'type'
            WHEN NEW.name IS DISTINCT FROM OLD.name THEN 'name'
            WHEN NEW.owner IS DISTINCT FROM OLD.owner THEN 'owner'
            -- A delete request, as the DELETE trigger or a client's UPDATE makes it.
            WHEN NEW.status IS DISTINCT FROM OLD.status
                 AND NOT (NEW.status = 'deleting' AND NEW.status_message = 'delete requested') THEN 'status'
            WHEN NEW.status_message IS DISTINCT FROM OLD.status_message
                 AND NOT (NEW.status = 'deleting' AND OLD.status <> 'deleting') THEN 'status_message'
            WHEN NEW.state IS DISTINCT FROM OLD.state THEN 'state'
            WHEN NEW.config IS DISTINCT FROM OLD.config THEN 'config'
            WHEN NEW.generation IS DISTINCT FROM OLD.generation THEN 'generation'
            WHEN NEW.observed_generation IS DISTINCT FROM OLD.observed_generation THEN 'observed_generation'
            WHEN NEW.attempts IS DISTINCT FROM OLD.attempts
                 AND NOT (NEW.attempts = 0 AND NEW.status = 'deleting' AND OLD.status <> 'deleting') THEN 'attempts'
            WHEN NEW.next_attempt_at IS DISTINCT FROM OLD.next_attempt_at
                 AND NOT (NEW.next_attempt_at IS NULL AND NEW.status = 'deleting' AND OLD.status <> 'deleting') THEN 'next_attempt_at'
            WHEN NEW.last_error IS DISTINCT FROM OLD.last_error THEN 'last_error'
            WHEN NEW.lease_holder IS DISTINCT FROM OLD.lease_holder THEN 'lease_holder'
            WHEN NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at THEN 'lease_expires_at'
            WHEN NEW.lease_token IS DISTINCT FROM OLD.lease_token THEN 'lease_token'
            WHEN NEW.ready_at IS DISTINCT FROM OLD.ready_at THEN 'ready_at'
            WHEN NEW.unhealthy_since IS DISTINCT FROM OLD.unhealthy_since THEN 'unhealthy_since'
            WHEN NEW.created_at IS DISTINCT FROM OLD.created_at THEN 'created_at'
            WHEN NEW.updated_at IS DISTINCT FROM OLD.updated_at THEN 'updated_at'
            WHEN NEW.status_changed_at IS DISTINCT FROM OLD.status_changed_at THEN 'status_changed_at'
        END;
    END IF;
    IF col IS NOT NULL THEN
        RAISE EXCEPTION 'column "%" of resources is written by the Berth agent only (role % is a client)', col, current_user
            USING ERRCODE = 'insufficient_privilege', COLUMN = col, TABLE = 'resources',
                  HINT = 'clients write type, name, owner, provisioner, args, labels, paused, hibernate and retry_requested_at; DELETE the row to delete the resource';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER resources_authorize_write
    BEFORE INSERT OR UPDATE ON resources
    FOR EACH ROW EXECUTE FUNCTION berth_resources_authorize_write();

-- The DELETE trigger of 0001, with the finalizing DELETE kept for the agent (the owner's
-- role, as berth_resources_authorize_write tells it).
CREATE OR REPLACE FUNCTION berth_resources_before_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    owner oid;
BEGIN
    IF current_setting('berth.finalizing', true) = 'on' THEN
        SELECT c.relowner INTO owner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID;
        IF pg_catalog.pg_has_role(current_user, owner, 'USAGE') THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'only the Berth agent removes a resource without deprovisioning it (berth.finalizing; role % is a client)', current_user
            USING ERRCODE = 'insufficient_privilege', TABLE = 'resources',
                  HINT = 'DELETE without berth.finalizing requests the delete; the agent removes the row once it has deprovisioned the resource';
    END IF;
    UPDATE resources
       SET status = 'deleting',
           status_message = 'delete requested',
           next_attempt_at = NULL,
           attempts = 0
     WHERE id = OLD.id AND status <> 'deleting';
    RETURN NULL;
END
$$;

-- Which client role acts for which owners, when owner isolation is on.
CREATE TABLE berth_owner_grants (
    role_name  text NOT NULL,
    owner      text NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (role_name, owner)
);

-- A client reads its own grants only (when isolation is on, the table's row security is on).
CREATE POLICY berth_owner_grants_own ON berth_owner_grants
    USING (role_name = current_user);

CREATE POLICY resources_owner_isolation ON resources
    USING (owner IN (SELECT g.owner FROM berth_owner_grants g WHERE g.role_name = current_user))
    WITH CHECK (owner IN (SELECT g.owner FROM berth_owner_grants g WHERE g.role_name = current_user));

-- A resource's history is seen by whoever sees the resource.
CREATE POLICY resource_events_owner_isolation ON resource_events
    USING (EXISTS (SELECT 1 FROM resources r WHERE r.id = resource_events.resource_id));

-- The triggers that write tables a client has no right on run as the tables' owner, with
-- search_path pinned to this schema (pg_temp last, so no temporary table stands in).
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['berth_resources_log_change()', 'berth_resources_log_event()', 'berth_resource_events_notify()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
