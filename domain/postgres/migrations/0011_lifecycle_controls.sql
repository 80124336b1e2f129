-- 0011: the lifecycle controls a client has over a resource (pause, hibernate and wake, retry
-- now, labels), the statuses of hibernation, and the announcement of every new event.
--
--   * labels: the client's key/value tags, a JSON object of string values (default {});
--   * paused: the agent does nothing to the row while it is set (no reconcile, no health
--     check or repair, not even a delete, which is carried out on resume);
--   * hibernate: the client's wish that the resource be hibernated (true) or running
--     (false); the status says how far the agent got (hibernating, then hibernated);
--   * retry_requested_at: when a client last asked for the resource to be retried at once;
--   * status_changed_at: when the status last changed (backfilled from updated_at), set by
--     the update trigger whenever the status changes, whoever changes it.
--
-- resources.status gains 'hibernating' and 'hibernated'; resource_events.kind gains
-- 'control'. The triggers give every writer, plain SQL included, the behaviour of the CLI:
--
--   * a change of labels bumps generation and resets the retry bookkeeping, as one of args
--     does (the Kubernetes environ labels its objects anew);
--   * a change of hibernate, or of retry_requested_at (SET retry_requested_at = now()),
--     resets the retry bookkeeping (attempts, next_attempt_at, last_error), so the agent
--     reconciles at once; a change of hibernate on a row being deleted is refused;
--   * a change of paused, hibernate or retry_requested_at is logged to change_log and
--     announced on berth_resource_changes, as changes of desired state are;
--   * each control is recorded as one event of kind 'control', with the row's status after
--     it and the message 'paused', 'resumed', 'hibernate requested', 'wake requested',
--     'retry requested' or 'labels changed: k1=v1, k2=v2' (by key; 'labels changed: none');
--   * every event inserted is announced on berth_resource_events, so the
--     feed that watches and waits tail (EventsAfter) wakes at once.
--
-- A row the agent has work on is now one not paused that is pending, provisioning,
-- deleting, in error or hibernating; or asked to hibernate and not hibernated yet; or asked
-- to run and hibernated or ahead of its observed generation. resources_needing_attention_idx
-- is built again with that predicate, which the agent's queries state word for word
-- (domain/internal/backend.NeedsAttentionSQL).

ALTER TABLE resources
    ADD COLUMN labels jsonb NOT NULL DEFAULT '{}'
        CONSTRAINT resources_labels_check
        CHECK (jsonb_typeof(labels) = 'object' AND NOT jsonb_path_exists(labels, '$.* ? (@.type() != "string")')),
    ADD COLUMN paused boolean NOT NULL DEFAULT false,
    ADD COLUMN hibernate boolean NOT NULL DEFAULT false,
    ADD COLUMN retry_requested_at timestamptz,
    ADD COLUMN status_changed_at timestamptz;

-- The backfill is no change of the rows: their triggers are kept from moving updated_at.
ALTER TABLE resources DISABLE TRIGGER USER;
UPDATE resources SET status_changed_at = updated_at;
ALTER TABLE resources ENABLE TRIGGER USER;
ALTER TABLE resources
    ALTER COLUMN status_changed_at SET DEFAULT now(),
    ALTER COLUMN status_changed_at SET NOT NULL;

ALTER TABLE resources DROP CONSTRAINT resources_status_check;
ALTER TABLE resources ADD CONSTRAINT resources_status_check
    CHECK (status IN ('pending', 'provisioning', 'ready', 'unhealthy', 'error', 'deleting', 'hibernating', 'hibernated'));

ALTER TABLE resource_events DROP CONSTRAINT resource_events_kind_check;
ALTER TABLE resource_events ADD CONSTRAINT resource_events_kind_check
    CHECK (kind IN ('status', 'error', 'repair', 'health', 'control'));

DROP INDEX resources_needing_attention_idx;
CREATE INDEX resources_needing_attention_idx ON resources (next_attempt_at)
    WHERE (NOT paused AND (status IN ('pending', 'provisioning', 'deleting', 'error', 'hibernating')
       OR (hibernate AND status <> 'hibernated')
       OR (NOT hibernate AND (status = 'hibernated' OR generation <> observed_generation))));

-- The rules of 0001, with labels counting as args do, the resets of hibernate and retry,
-- the refusal to hibernate or wake a row being deleted, and status_changed_at.
CREATE OR REPLACE FUNCTION berth_resources_before_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.args IS DISTINCT FROM OLD.args OR NEW.labels IS DISTINCT FROM OLD.labels THEN
        NEW.generation := OLD.generation + 1;
        NEW.attempts := 0;
        NEW.next_attempt_at := NULL;
        NEW.last_error := '';
    END IF;
    -- A delete request starts a fresh retry budget: failures of provisioning say nothing
    -- about deprovisioning.
    IF NEW.status = 'deleting' AND OLD.status <> 'deleting' THEN
        NEW.attempts := 0;
        NEW.next_attempt_at := NULL;
        NEW.last_error := '';
    END IF;
    -- What is deleted is neither hibernated nor woken: the agent deprovisions it whatever
    -- it was asked before.
    IF NEW.hibernate IS DISTINCT FROM OLD.hibernate AND OLD.status = 'deleting' THEN
        RAISE EXCEPTION 'resource % is being deleted: it cannot be hibernated or woken', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'resources_hibernate_not_deleting';
    END IF;
    -- Hibernating, waking and a retry asked for are new work: earlier failures do not delay it.
    IF NEW.hibernate IS DISTINCT FROM OLD.hibernate OR NEW.retry_requested_at IS DISTINCT FROM OLD.retry_requested_at THEN
        NEW.attempts := 0;
        NEW.next_attempt_at := NULL;
        NEW.last_error := '';
    END IF;
    -- Moving a resource to another provisioner once something may have been provisioned for
    -- it would leak what the old one holds; before that, it is how a client fixes a resource
    -- that named an unknown provisioner.
    IF OLD.provisioner <> '' AND NEW.provisioner IS DISTINCT FROM OLD.provisioner THEN
        IF OLD.status NOT IN ('pending', 'error') OR OLD.observed_generation > 0 OR OLD.state <> '{}'::jsonb THEN
            RAISE EXCEPTION 'resource %: provisioner cannot change from "%" to "%" once provisioning started; delete the resource and create it again',
                OLD.id, OLD.provisioner, NEW.provisioner
                USING ERRCODE = 'check_violation', CONSTRAINT = 'resources_provisioner_fixed';
        END IF;
        NEW.attempts := 0;
        NEW.next_attempt_at := NULL;
        NEW.last_error := '';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        NEW.status_changed_at := now();
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END
$$;

-- The change log of 0001, now also of pausing and resuming, hibernating and waking, and a
-- retry asked for (a change of labels is one of generation).
CREATE OR REPLACE FUNCTION berth_resources_log_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changed uuid;
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed := OLD.id;
    ELSIF TG_OP = 'INSERT'
       OR NEW.generation IS DISTINCT FROM OLD.generation
       OR (OLD.provisioner <> '' AND NEW.provisioner IS DISTINCT FROM OLD.provisioner)
       OR (NEW.status = 'deleting' AND OLD.status IS DISTINCT FROM 'deleting')
       OR NEW.paused IS DISTINCT FROM OLD.paused
       OR NEW.hibernate IS DISTINCT FROM OLD.hibernate
       OR NEW.retry_requested_at IS DISTINCT FROM OLD.retry_requested_at THEN
        changed := NEW.id;
    ELSE
        RETURN NULL;
    END IF;
    INSERT INTO change_log (resource_id) VALUES (changed);
    PERFORM pg_notify('berth_resource_changes', '');
    RETURN NULL;
END
$$;

-- The history of 0002, and after a row's status event one control event per control the
-- write changed.
CREATE OR REPLACE FUNCTION berth_resources_log_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    health boolean := coalesce(current_setting('berth.event_kind', true), '') = 'health';
    kind   text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO resource_events (resource_id, kind, status, message)
        VALUES (NEW.id, 'status', NEW.status, coalesce(nullif(NEW.status_message, ''), 'created'));
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        INSERT INTO resource_events (resource_id, kind, status, message)
        VALUES (OLD.id, 'status', OLD.status, 'removed');
        RETURN NULL;
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status
       OR (NEW.status_message IS DISTINCT FROM OLD.status_message AND NOT health) THEN
        IF health THEN
            kind := 'health';
        ELSIF NEW.status = 'error' OR NEW.attempts > OLD.attempts THEN
            kind := 'error';
        ELSE
            kind := 'status';
        END IF;
        INSERT INTO resource_events (resource_id, kind, status, message)
        VALUES (NEW.id, kind, NEW.status, NEW.status_message);
    END IF;
    IF NEW.paused IS DISTINCT FROM OLD.paused THEN
        INSERT INTO resource_events (resource_id, kind, status, message)
        VALUES (NEW.id, 'control', NEW.status, CASE WHEN NEW.paused THEN 'paused' ELSE 'resumed' END);
    END IF;
    IF NEW.hibernate IS DISTINCT FROM OLD.hibernate THEN
        INSERT INTO resource_events (resource_id, kind, status, message)
        VALUES (NEW.id, 'control', NEW.status, CASE WHEN NEW.hibernate THEN 'hibernate requested' ELSE 'wake requested' END);
    END IF;
    IF NEW.retry_requested_at IS DISTINCT FROM OLD.retry_requested_at THEN
        INSERT INTO resource_events (resource_id, kind, status, message)
        VALUES (NEW.id, 'control', NEW.status, 'retry requested');
    END IF;
    IF NEW.labels IS DISTINCT FROM OLD.labels THEN
        INSERT INTO resource_events (resource_id, kind, status, message)
        VALUES (NEW.id, 'control', NEW.status, 'labels changed: ' || coalesce(
            (SELECT string_agg(key || '=' || value, ', ' ORDER BY key COLLATE "C") FROM jsonb_each_text(NEW.labels)), 'none'));
    END IF;
    RETURN NULL;
END
$$;

-- The event feed's wake-up: a notification for each event, of which PostgreSQL delivers one
-- per transaction (equal notifications are folded). A BEFORE row trigger runs at once, where
-- an AFTER trigger is queued to the statement's end and, with a transition table, costs the
-- agent's hot path a quarter of each event's insert.
CREATE FUNCTION berth_resource_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('berth_resource_events', '');
    RETURN NEW;
END
$$;

CREATE TRIGGER resource_events_notify
    BEFORE INSERT ON resource_events
    FOR EACH ROW EXECUTE FUNCTION berth_resource_events_notify();
