-- 0002: health state, resource history (events), capacity samples and capacity warnings.
--
--   * resources.unhealthy_since says since when a resource has failed its health check; it is
--     cleared whenever the resource leaves the unhealthy status, whoever moves it.
--   * resource_events is each resource's history. A trigger records every change of status or
--     status message (and the row's creation and removal), so every writer's transitions are
--     captured, plain SQL included. Health writes run SET LOCAL berth.event_kind = 'health':
--     their status changes are recorded as health events and a message that changes while the
--     status stays is not recorded (it would add a row per check). Repairs are inserted by the
--     health writer. Events have no foreign key: a removed resource's history stays until it
--     is pruned by age.
--   * capacity_samples is each provisioner's capacity over time: one row per host and one for
--     the total (host '') per sample.
--   * capacity_warnings is the current state of each provisioner's capacity warnings.

ALTER TABLE resources ADD COLUMN unhealthy_since timestamptz;

-- Serves the health checker's paging (ready and unhealthy rows by id).
CREATE INDEX resources_checkable_idx ON resources (id) WHERE status IN ('ready', 'unhealthy');

CREATE TABLE resource_events (
    seq         bigserial PRIMARY KEY,
    resource_id uuid NOT NULL,
    at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind        text NOT NULL
                CONSTRAINT resource_events_kind_check CHECK (kind IN ('status', 'error', 'repair', 'health')),
    status      text NOT NULL,
    message     text NOT NULL DEFAULT ''
);

CREATE INDEX resource_events_resource_idx ON resource_events (resource_id, seq);
CREATE INDEX resource_events_at_idx ON resource_events (at);

CREATE FUNCTION berth_resources_unhealthy_since() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status <> 'unhealthy' THEN
        NEW.unhealthy_since := NULL;
    END IF;
    RETURN NEW;
END
$$;

-- Runs after resources_before_update (triggers fire in name order).
CREATE TRIGGER resources_before_update_unhealthy
    BEFORE UPDATE ON resources
    FOR EACH ROW EXECUTE FUNCTION berth_resources_unhealthy_since();

CREATE FUNCTION berth_resources_log_event() RETURNS trigger
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
    IF NEW.status IS NOT DISTINCT FROM OLD.status
       AND (NEW.status_message IS NOT DISTINCT FROM OLD.status_message OR health) THEN
        RETURN NULL;
    END IF;
    IF health THEN
        kind := 'health';
    ELSIF NEW.status = 'error' OR NEW.attempts > OLD.attempts THEN
        kind := 'error';
    ELSE
        kind := 'status';
    END IF;
    INSERT INTO resource_events (resource_id, kind, status, message)
    VALUES (NEW.id, kind, NEW.status, NEW.status_message);
    RETURN NULL;
END
$$;

CREATE TRIGGER resources_log_event
    AFTER INSERT OR UPDATE OR DELETE ON resources
    FOR EACH ROW EXECUTE FUNCTION berth_resources_log_event();

CREATE TABLE capacity_samples (
    at          timestamptz NOT NULL,
    provisioner text NOT NULL,
    host        text NOT NULL DEFAULT '',
    unit        text NOT NULL,
    total       bigint NOT NULL,
    used        bigint NOT NULL,
    down        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (provisioner, host, at)
);

CREATE INDEX capacity_samples_at_idx ON capacity_samples (at);

CREATE TABLE capacity_warnings (
    provisioner text NOT NULL,
    kind        text NOT NULL,
    active      boolean NOT NULL,
    message     text NOT NULL DEFAULT '',
    since       timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provisioner, kind)
);
