-- 0029: a resource created alone is announced to the agent with its row.
--
-- The agent learnt of a new resource from a bare NOTIFY on berth_resource_changes, then read
-- the change log and the row in a round trip of its own before it could place the resource:
-- on an idle server a third of the time from the insert to the ready record, and the stage
-- with the longest tail. A single-row INSERT now also sends its change-log entry's seq and
-- the new row, as JSON, on a channel of the agent's own, before the usual wake-up, so the
-- agent can start at once.
--
-- A payload is readable by every session that LISTENs on its channel, and any role may
-- LISTEN on any channel: on berth_resource_changes the row would show one owner's args to
-- another, past owner isolation, and to roles that may not read resources at all. So the
-- channel's name is a secret: a random name kept in announce_channel, which only the
-- tables' owner (the agent) reads, and which no client role is granted (GrantClientRole
-- grants its list of tables). The trigger reads it as the tables' owner. The agent LISTENs
-- from inside a DO block, so the name is in no statement text that pg_stat_activity or
-- pg_stat_statements shows. A row whose JSON would not fit a notification (8,000 bytes) and
-- a statement of many rows are announced with the bare wake-up only, as before.
--
-- The agent acts on an announced row only where its write checks the row again under the
-- row's lock, as it does with a row read with the change log; the change log stays the
-- record, read from its cursor as before.

CREATE TABLE announce_channel (
    only_row boolean PRIMARY KEY DEFAULT true CONSTRAINT announce_channel_one_row CHECK (only_row),
    name     text NOT NULL
);

INSERT INTO announce_channel (name) VALUES ('berth_announce_' || replace(gen_random_uuid()::text, '-', ''));

-- A role the owner's default privileges grant rights on new tables (ALTER DEFAULT PRIVILEGES,
-- say for a monitoring role) would be able to read the name: no role but the owner keeps any.
DO $$
DECLARE
    grantee oid;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = 'announce_channel'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('REVOKE ALL ON announce_channel FROM %s',
                       CASE WHEN grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(grantee)) END);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION berth_resources_log_created() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    logged       bigint;
    channel      text;
    announcement text;
BEGIN
    WITH l AS (
        INSERT INTO change_log (resource_id, owner) SELECT a.id, a.owner FROM added a RETURNING seq
    )
    SELECT CASE WHEN count(*) = 1 THEN max(l.seq) END INTO logged FROM l;
    IF logged IS NOT NULL THEN
        SELECT '{"seq":' || logged || ',"row":' || row_to_json(a) || '}', (SELECT c.name FROM announce_channel c)
          INTO announcement, channel FROM added a;
        IF channel IS NOT NULL AND octet_length(announcement) < 8000 THEN
            PERFORM pg_notify(channel, announcement);
        END IF;
    END IF;
    PERFORM pg_notify('berth_resource_changes', '');
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT a.id, 'status', a.status, coalesce(nullif(a.status_message, ''), 'created') FROM added a;
    RETURN NULL;
END
$$;

-- As migration 0012 set them up: the trigger writes tables a client has no right on, so it
-- runs as the tables' owner, with search_path pinned to this schema (pg_temp last, so no
-- temporary table stands in). CREATE OR REPLACE resets both.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION berth_resources_log_created() SECURITY DEFINER SET search_path = %I, pg_temp', current_schema());
END
$$;
