-- 0024: a statement's new resources are logged once per statement: one change-log insert,
-- one NOTIFY and one insert of their 'created' events, from the statement's inserted rows,
-- instead of two trigger calls per row.
--
-- A client that creates many resources in one INSERT (a bulk import, the bench's burst) paid
-- 56 us a row on an idle server, 31 with this; a single-row INSERT, as the CLI makes, costs
-- the same as before (104 us against 105). Every row gets the same change-log entry and the
-- same event, in the statement's row order, at the statement's end as the row triggers'
-- were; rows an INSERT ... ON CONFLICT updates instead are logged by the update triggers, as
-- before. Deletes and updates stay logged per row, so the row functions lose their INSERT
-- branches.

CREATE FUNCTION berth_resources_log_created() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO change_log (resource_id) SELECT a.id FROM added a;
    PERFORM pg_notify('berth_resource_changes', '');
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT a.id, 'status', a.status, coalesce(nullif(a.status_message, ''), 'created') FROM added a;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION berth_resources_log_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changed uuid;
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed := OLD.id;
    ELSIF NEW.generation IS DISTINCT FROM OLD.generation
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

CREATE OR REPLACE FUNCTION berth_resources_log_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    health boolean := coalesce(current_setting('berth.event_kind', true), '') = 'health';
    kind   text;
BEGIN
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

-- As migration 0012 set them up: the triggers write tables a client has no right on, so they
-- run as the tables' owner, with search_path pinned to this schema (pg_temp last, so no
-- temporary table stands in). CREATE OR REPLACE resets both.
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['berth_resources_log_created()', 'berth_resources_log_change()', 'berth_resources_log_event()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;

DROP TRIGGER resources_log_change ON resources;
CREATE TRIGGER resources_log_change
    AFTER DELETE ON resources
    FOR EACH ROW EXECUTE FUNCTION berth_resources_log_change();
DROP TRIGGER resources_log_event ON resources;
CREATE TRIGGER resources_log_event
    AFTER DELETE ON resources
    FOR EACH ROW EXECUTE FUNCTION berth_resources_log_event();
CREATE TRIGGER resources_log_created
    AFTER INSERT ON resources
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION berth_resources_log_created();
