-- 0026: the triggers recognise the agent's role from the catalog cache, not by a query per
-- row.
--
-- The agent is the role that owns Berth's tables, a member of it, or a superuser (0012).
-- Each row a write touched looked the table's owner up in pg_class with a query of its own
-- and asked pg_has_role about it: two thirds of the authorisation trigger's time, 10 to 15 us
-- of each row the agent wrote. has_table_privilege(TG_RELID, 'TRIGGER WITH GRANT OPTION') is
-- answered from the catalog cache, as a plain expression, and is true for exactly those
-- roles: PostgreSQL gives the owner every right on its table with the grant option, and
-- passes it to the owner's members (as pg_has_role's USAGE does, NOINHERIT members excluded)
-- and to superusers. Nobody else holds it unless the owner grants it (berth migrate
-- --client-role revokes everything of a client role first, that grant option included):
-- granting it is granting the agent's role, as making a role a member of the owner is. The
-- rules, the errors, their order and their hints are unchanged.

CREATE OR REPLACE FUNCTION berth_resources_authorize_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    col   text;
    agent boolean := pg_catalog.has_table_privilege(TG_RELID, 'TRIGGER WITH GRANT OPTION');
BEGIN
    -- An admission is checked first, as its own trigger did before 0021.
    IF NOT agent AND (CASE WHEN TG_OP = 'INSERT' THEN NEW.admitted_provisioner IS NOT NULL OR NEW.admitted_units IS NOT NULL
                           ELSE NEW.admitted_provisioner IS DISTINCT FROM OLD.admitted_provisioner
                                OR NEW.admitted_units IS DISTINCT FROM OLD.admitted_units END) THEN
        RAISE EXCEPTION 'columns "admitted_provisioner" and "admitted_units" of resources are written by the Berth agent only (role % is a client)', current_user
            USING ERRCODE = 'insufficient_privilege', COLUMN = 'admitted_units', TABLE = 'resources',
                  HINT = 'the agent admits resources against owner quotas (berth quota)';
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status = 'deleting' AND NEW.status <> 'deleting' THEN
        RAISE EXCEPTION 'resource % is being deleted: its status stays deleting until the agent has deprovisioned it and removed the row; create the resource again afterwards', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'resources_deleting_final';
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status = 'deleting' AND OLD.status <> 'deleting' AND NEW.reason IS NOT DISTINCT FROM OLD.reason THEN
        NEW.reason := 'DeleteRequested';
        NEW.waiting_since := NULL;
    END IF;
    IF agent THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        col := CASE
            WHEN NEW.status <> 'pending' THEN 'status'
            WHEN NEW.status_message <> '' THEN 'status_message'
            WHEN NEW.reason <> 'Created' THEN 'reason'
            WHEN NEW.waiting_since IS NOT NULL THEN 'waiting_since'
            WHEN NEW.last_attempt_at IS NOT NULL THEN 'last_attempt_at'
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
            WHEN NEW.reason IS DISTINCT FROM OLD.reason
                 AND NOT (NEW.reason = 'DeleteRequested' AND NEW.status = 'deleting' AND OLD.status <> 'deleting') THEN 'reason'
            WHEN NEW.waiting_since IS DISTINCT FROM OLD.waiting_since
                 AND NOT (NEW.waiting_since IS NULL AND NEW.status = 'deleting' AND OLD.status <> 'deleting') THEN 'waiting_since'
            WHEN NEW.last_attempt_at IS DISTINCT FROM OLD.last_attempt_at THEN 'last_attempt_at'
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
END$$;


-- The finalizing DELETE's check, recognising the agent the same way.
CREATE OR REPLACE FUNCTION berth_resources_before_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('berth.finalizing', true) = 'on' THEN
        IF pg_catalog.has_table_privilege(TG_RELID, 'TRIGGER WITH GRANT OPTION') THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'only the Berth agent removes a resource without deprovisioning it (berth.finalizing; role % is a client)', current_user
            USING ERRCODE = 'insufficient_privilege', TABLE = 'resources',
                  HINT = 'DELETE without berth.finalizing requests the delete; the agent removes the row once it has deprovisioned the resource';
    END IF;
    UPDATE resources
       SET status = 'deleting',
           status_message = 'delete requested',
           reason = 'DeleteRequested',
           waiting_since = NULL,
           next_attempt_at = NULL,
           attempts = 0
     WHERE id = OLD.id AND status <> 'deleting';
    RETURN NULL;
END
$$;
