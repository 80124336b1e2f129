-- 0001: the resources table, its change log and slot reservations.
--
-- Clients may write these tables with plain SQL; the triggers below give such writes the same
-- behaviour as the CLI:
--
--   * changing args bumps generation and resets the retry bookkeeping;
--   * changes of desired state (a new row, new args, a provisioner change, a delete request,
--     the row's removal) are appended to change_log and announced on the
--     berth_resource_changes channel, while the agent's own progress writes (status, state,
--     config, lease, pinning an unset provisioner) are not, so the agent never wakes itself;
--   * a DELETE is turned into a delete request: the row moves to status 'deleting' and stays
--     until the agent has freed what the environ holds for it. Only a transaction that has run
--     SET LOCAL berth.finalizing = 'on' (the agent, once the environ let go) removes the row.

CREATE TABLE resources (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    type                text NOT NULL
                        CONSTRAINT resources_type_check CHECK (type IN ('runtime', 'clickhouse')),
    name                text NOT NULL
                        CONSTRAINT resources_name_check CHECK (btrim(name) <> ''),
    owner               text NOT NULL DEFAULT '',
    provisioner         text NOT NULL DEFAULT '',
    args                jsonb NOT NULL DEFAULT '{}'
                        CONSTRAINT resources_args_check CHECK (jsonb_typeof(args) = 'object'),
    generation          bigint NOT NULL DEFAULT 1,
    observed_generation bigint NOT NULL DEFAULT 0,
    status              text NOT NULL DEFAULT 'pending'
                        CONSTRAINT resources_status_check
                        CHECK (status IN ('pending', 'provisioning', 'ready', 'unhealthy', 'error', 'deleting')),
    status_message      text NOT NULL DEFAULT '',
    state               jsonb NOT NULL DEFAULT '{}',
    config              jsonb NOT NULL DEFAULT '{}',
    attempts            int NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz,
    last_error          text NOT NULL DEFAULT '',
    lease_holder        text,
    lease_expires_at    timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    ready_at            timestamptz
);

CREATE UNIQUE INDEX resources_owner_type_name_key ON resources (owner, type, lower(name));

-- Serves the agent's "what needs work" query; its predicate is that query's WHERE clause, so
-- the index holds only rows the agent has work on.
CREATE INDEX resources_needing_attention_idx ON resources (next_attempt_at)
    WHERE status IN ('pending', 'provisioning', 'deleting', 'error')
       OR generation <> observed_generation;

CREATE TABLE change_log (
    seq         bigserial PRIMARY KEY,
    resource_id uuid NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX change_log_created_at_idx ON change_log (created_at);

-- A reservation is released by the environ when it frees the resource, and sweeps find orphans;
-- there is deliberately no foreign key to resources.
CREATE TABLE slot_reservations (
    provisioner text NOT NULL,
    resource_id uuid NOT NULL,
    owner       text NOT NULL DEFAULT '',
    host        text NOT NULL,
    slots       int NOT NULL CONSTRAINT slot_reservations_slots_check CHECK (slots > 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provisioner, resource_id)
);

CREATE INDEX slot_reservations_host_idx ON slot_reservations (provisioner, host);

-- New args are a new generation: the agent must bring the resource to it, and failures of the
-- old args say nothing about the new ones.
CREATE FUNCTION berth_resources_before_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.args IS DISTINCT FROM OLD.args THEN
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
    NEW.updated_at := now();
    RETURN NEW;
END
$$;

CREATE TRIGGER resources_before_update
    BEFORE UPDATE ON resources
    FOR EACH ROW EXECUTE FUNCTION berth_resources_before_update();

-- Logs changes of desired state only. A provisioner change is logged only when the old value
-- was set: the agent pins an unset provisioner in its progress writes, and logging that would
-- wake the agent for its own write. (The agent's pin applies only while the column is unset or
-- already equal, so it never overrides a client's choice.)
CREATE FUNCTION berth_resources_log_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    changed uuid;
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed := OLD.id;
    ELSIF TG_OP = 'INSERT'
       OR NEW.generation IS DISTINCT FROM OLD.generation
       OR (OLD.provisioner <> '' AND NEW.provisioner IS DISTINCT FROM OLD.provisioner)
       OR (NEW.status = 'deleting' AND OLD.status IS DISTINCT FROM 'deleting') THEN
        changed := NEW.id;
    ELSE
        RETURN NULL;
    END IF;
    INSERT INTO change_log (resource_id) VALUES (changed);
    PERFORM pg_notify('berth_resource_changes', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER resources_log_change
    AFTER INSERT OR UPDATE OR DELETE ON resources
    FOR EACH ROW EXECUTE FUNCTION berth_resources_log_change();

-- A DELETE becomes a delete request, so the environ frees what it holds before the row goes.
-- The agent removes the row in a transaction that sets berth.finalizing; an operator who
-- really means to drop a row without deprovisioning it can do the same.
CREATE FUNCTION berth_resources_before_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('berth.finalizing', true) = 'on' THEN
        RETURN OLD;
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

CREATE TRIGGER resources_before_delete
    BEFORE DELETE ON resources
    FOR EACH ROW EXECUTE FUNCTION berth_resources_before_delete();
