-- 0015: why a resource is in its status, and the times the state machine keeps beside it,
-- as columns the agent writes in the same statement as the status, so that no code reads
-- them back out of the status message (which is for people only).
--
--   * reason: one CamelCase word from the status's closed list (domain.ReasonsByStatus; the
--     package doc of domain lists them). A new row is 'Created': nothing done to it yet,
--     which is what the claim starts;
--   * waiting_since: when the resource began waiting for capacity; set while the reason is
--     'WaitingForCapacity' and kept across its retries, NULL otherwise;
--   * last_attempt_at: when the agent last recorded the outcome of an attempt (database
--     clock); NULL before the first.
--
-- The three are the agent's: a client's write of them is refused, as of status. A delete
-- request (a client's DELETE, or its move of the status to 'deleting') sets the reason
-- 'DeleteRequested' and clears waiting_since.
--
-- The backfill reads the status and message of the rows as the agent wrote them before
-- this migration, once; last_attempt_at stays NULL, as no column says when an attempt was
-- last recorded (updated_at is also moved by a client's writes).

ALTER TABLE resources
    ADD COLUMN reason text NOT NULL DEFAULT 'Created',
    ADD COLUMN waiting_since timestamptz,
    ADD COLUMN last_attempt_at timestamptz;

-- The backfill is no change of the rows: their triggers are kept from moving updated_at or
-- recording events.
ALTER TABLE resources DISABLE TRIGGER USER;
UPDATE resources
   SET reason = CASE status
           WHEN 'pending' THEN CASE WHEN status_message = '' THEN 'Created' ELSE 'WaitingForCapacity' END
           WHEN 'provisioning' THEN CASE
               WHEN status_message ~ '^attempt [0-9]+ failed' THEN 'Backoff'
               WHEN status_message LIKE '%: waiting for it to serve' THEN 'AwaitingReady'
               ELSE 'Provisioning' END
           WHEN 'ready' THEN CASE WHEN status_message LIKE '%passing again%' THEN 'Recovered' ELSE 'Available' END
           WHEN 'unhealthy' THEN 'HealthCheckFailed'
           WHEN 'error' THEN CASE WHEN status_message LIKE '% is not JSON Berth can read: %' THEN 'UnreadableRow' ELSE 'BrokerError' END
           WHEN 'deleting' THEN CASE
               WHEN status_message = 'delete requested' THEN 'DeleteRequested'
               WHEN status_message ~ '^deprovision attempt [0-9]+ failed' THEN 'Backoff'
               ELSE 'DeleteRequested' END
           WHEN 'hibernating' THEN CASE WHEN status_message ~ '^hibernate attempt [0-9]+ failed' THEN 'Backoff' ELSE 'Hibernating' END
           WHEN 'hibernated' THEN 'Hibernated'
           ELSE reason END,
       -- 'waiting for capacity since 2026-01-02T03:04:05Z: why'; a row waiting that does not
       -- say since when has waited since its status last changed.
       waiting_since = CASE WHEN status = 'pending' AND status_message <> '' THEN coalesce(
           substring(status_message FROM '^waiting for capacity since ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})): ')::timestamptz,
           status_changed_at) END
 WHERE status <> 'pending' OR status_message <> '';
ALTER TABLE resources ENABLE TRIGGER USER;

-- 0012's guard, with reason, waiting_since and last_attempt_at the agent's. A move to
-- 'deleting' that names no reason of its own is a delete request, whoever writes it: it
-- runs first of the BEFORE triggers, so the guard below sees the reason it gets.
CREATE OR REPLACE FUNCTION berth_resources_authorize_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    col   text;
    owner oid;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = 'deleting' AND NEW.status <> 'deleting' THEN
        RAISE EXCEPTION 'resource % is being deleted: its status stays deleting until the agent has deprovisioned it and removed the row; create the resource again afterwards', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'resources_deleting_final';
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status = 'deleting' AND OLD.status <> 'deleting' AND NEW.reason IS NOT DISTINCT FROM OLD.reason THEN
        NEW.reason := 'DeleteRequested';
        NEW.waiting_since := NULL;
    END IF;
    SELECT c.relowner INTO owner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID;
    IF pg_catalog.pg_has_role(current_user, owner, 'USAGE') THEN
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
END
$$;

-- 0012's DELETE trigger, the request naming its reason.
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
           reason = 'DeleteRequested',
           waiting_since = NULL,
           next_attempt_at = NULL,
           attempts = 0
     WHERE id = OLD.id AND status <> 'deleting';
    RETURN NULL;
END
$$;
