-- 0021: a client's write of a resource's admission (admitted_provisioner, admitted_units) is
-- refused by the trigger that checks every other agent-only column, not by triggers of its
-- own. The agent's every admission fired them (one-transaction provisioning admits each
-- runtime), and each looked the table's owner up again; one trigger now looks it up once per
-- row. The rule, the error, its order (an admission is refused before any other column) and
-- its hint are unchanged.

DROP TRIGGER resources_authorize_admission_insert ON resources;
DROP TRIGGER resources_authorize_admission_update ON resources;
DROP FUNCTION berth_resources_authorize_admission();

CREATE OR REPLACE FUNCTION berth_resources_authorize_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    col   text;
    owner oid;
    agent boolean;
BEGIN
    SELECT c.relowner INTO owner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID;
    agent := pg_catalog.pg_has_role(current_user, owner, 'USAGE');
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
