-- 0028: each change-log entry carries its resource's owner as the write it records left it.
--
-- Every agent's watcher reads every entry, and routes it to its owner's fair queue. The read
-- looked the owner up in resources for each entry: on an idle server a page of 1,000 entries
-- took 3.9 ms with the lookups and 0.48 ms without, and with three agents on one database a
-- burst's entries were looked up three times over. The writer has the row at hand, so the
-- entry now takes the owner with it.
--
-- A removal's entry carries the removed row's owner (the read could only give '' for it).
-- Entries written before this migration, and any written without an owner, keep owner NULL:
-- the read looks those up in resources as before, so nothing is backfilled and the column is
-- added without rewriting the table.

ALTER TABLE change_log ADD COLUMN owner text;

CREATE OR REPLACE FUNCTION berth_resources_log_created() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO change_log (resource_id, owner) SELECT a.id, a.owner FROM added a;
    PERFORM pg_notify('berth_resource_changes', '');
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT a.id, 'status', a.status, coalesce(nullif(a.status_message, ''), 'created') FROM added a;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION berth_resources_log_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO change_log (resource_id, owner) VALUES (OLD.id, OLD.owner);
    ELSIF NEW.generation IS DISTINCT FROM OLD.generation
       OR (OLD.provisioner <> '' AND NEW.provisioner IS DISTINCT FROM OLD.provisioner)
       OR (NEW.status = 'deleting' AND OLD.status IS DISTINCT FROM 'deleting')
       OR NEW.paused IS DISTINCT FROM OLD.paused
       OR NEW.hibernate IS DISTINCT FROM OLD.hibernate
       OR NEW.retry_requested_at IS DISTINCT FROM OLD.retry_requested_at THEN
        INSERT INTO change_log (resource_id, owner) VALUES (NEW.id, NEW.owner);
    ELSE
        RETURN NULL;
    END IF;
    PERFORM pg_notify('berth_resource_changes', '');
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
    FOREACH f IN ARRAY ARRAY['berth_resources_log_created()', 'berth_resources_log_change()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
