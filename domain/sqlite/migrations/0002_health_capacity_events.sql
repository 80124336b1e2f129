-- 0002: health state, resource history (events), capacity samples and capacity warnings.
-- The SQLite dialect of the PostgreSQL migration of the same name.
--
--   * resources.unhealthy_since says since when a resource has failed its health check; it is
--     cleared whenever the resource leaves the unhealthy status, whoever moves it.
--   * resource_events is each resource's history. The triggers record every change of status
--     or status message (and the row's creation and removal), so every writer's transitions
--     are captured, plain SQL included. A health write records the 'health' intent for the row
--     first (PostgreSQL: SET LOCAL berth.event_kind = 'health'): its status changes are
--     recorded as health events and a message that changes while the status stays is not
--     recorded (it would add a row per check). Repairs are inserted by the health writer.
--     Events have no foreign key: a removed resource's history stays until it is pruned by age.
--   * capacity_samples is each provisioner's capacity over time: one row per host and one for
--     the total (host '') per sample.
--   * capacity_warnings is the current state of each provisioner's capacity warnings.
--
-- Booleans are integers 0 and 1.

ALTER TABLE resources ADD COLUMN unhealthy_since TEXT
    CONSTRAINT resources_unhealthy_since_check CHECK (unhealthy_since IS NULL OR strftime('%Y-%m-%dT%H:%M:%fZ', unhealthy_since) IS NOT NULL);

-- Serves the health checker's paging (ready and unhealthy rows by id).
CREATE INDEX resources_checkable_idx ON resources (id) WHERE status IN ('ready', 'unhealthy');

CREATE TABLE resource_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id TEXT NOT NULL,
    at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    kind        TEXT NOT NULL
                CONSTRAINT resource_events_kind_check CHECK (kind IN ('status', 'error', 'repair', 'health')),
    status      TEXT NOT NULL,
    message     TEXT NOT NULL DEFAULT ''
);

CREATE INDEX resource_events_resource_idx ON resource_events (resource_id, seq);
CREATE INDEX resource_events_at_idx ON resource_events (at);

-- The triggers of 0001, now also keeping unhealthy_since and the history.
DROP TRIGGER resources_after_update;
CREATE TRIGGER resources_after_update
    AFTER UPDATE ON resources
BEGIN
    UPDATE resources
       SET generation       = CASE WHEN json(NEW.args) IS NOT json(OLD.args) THEN OLD.generation + 1 ELSE NEW.generation END,
           attempts         = CASE WHEN (json(NEW.args) IS NOT json(OLD.args)
                      OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                      OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)) THEN 0 ELSE NEW.attempts END,
           next_attempt_at  = CASE WHEN (json(NEW.args) IS NOT json(OLD.args)
                      OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                      OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)) THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at) END,
           last_error       = CASE WHEN (json(NEW.args) IS NOT json(OLD.args)
                      OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                      OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)) THEN '' ELSE NEW.last_error END,
           lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at),
           created_at       = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at),
           ready_at         = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at),
           unhealthy_since  = CASE WHEN NEW.status = 'unhealthy' THEN strftime('%Y-%m-%dT%H:%M:%fZ', NEW.unhealthy_since) END,
           updated_at       = CASE WHEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') > OLD.updated_at THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                                   ELSE strftime('%Y-%m-%dT%H:%M:%fZ', OLD.updated_at, '+0.001 seconds') END
     WHERE id = NEW.id;
    INSERT INTO change_log (resource_id)
    SELECT NEW.id
     WHERE json(NEW.args) IS NOT json(OLD.args)
        OR NEW.generation IS NOT OLD.generation
        OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
        OR (NEW.status = 'deleting' AND OLD.status IS NOT 'deleting');
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT NEW.id,
           CASE WHEN w.health THEN 'health'
                WHEN NEW.status = 'error'
                  OR (NEW.attempts > OLD.attempts AND NOT (json(NEW.args) IS NOT json(OLD.args)
                              OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                              OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner))) THEN 'error'
                ELSE 'status' END,
           NEW.status, NEW.status_message
      FROM (SELECT EXISTS (SELECT 1 FROM write_intents WHERE resource_id = NEW.id AND intent = 'health') AS health) AS w
     WHERE NEW.status IS NOT OLD.status
        OR (NEW.status_message IS NOT OLD.status_message AND NOT w.health);
END;

DROP TRIGGER resources_after_insert;
CREATE TRIGGER resources_after_insert
    AFTER INSERT ON resources
BEGIN
    UPDATE resources
       SET next_attempt_at  = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at),
           lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at),
           created_at       = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at),
           updated_at       = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at),
           ready_at         = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at),
           unhealthy_since  = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.unhealthy_since)
     WHERE id = NEW.id
       AND (NEW.next_attempt_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at)
            OR NEW.lease_expires_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at)
            OR NEW.created_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at)
            OR NEW.updated_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at)
            OR NEW.ready_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at)
            OR NEW.unhealthy_since IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.unhealthy_since));
    INSERT INTO change_log (resource_id) VALUES (NEW.id);
    INSERT INTO resource_events (resource_id, kind, status, message)
    VALUES (NEW.id, 'status', NEW.status, coalesce(nullif(NEW.status_message, ''), 'created'));
END;

DROP TRIGGER resources_after_delete;
CREATE TRIGGER resources_after_delete
    AFTER DELETE ON resources
BEGIN
    DELETE FROM write_intents WHERE resource_id = OLD.id;
    INSERT INTO change_log (resource_id) VALUES (OLD.id);
    INSERT INTO resource_events (resource_id, kind, status, message)
    VALUES (OLD.id, 'status', OLD.status, 'removed');
END;

CREATE TABLE capacity_samples (
    at          TEXT NOT NULL,
    provisioner TEXT NOT NULL,
    host        TEXT NOT NULL DEFAULT '',
    unit        TEXT NOT NULL,
    total       INTEGER NOT NULL,
    used        INTEGER NOT NULL,
    down        INTEGER NOT NULL DEFAULT 0 CONSTRAINT capacity_samples_down_check CHECK (down IN (0, 1)),
    PRIMARY KEY (provisioner, host, at)
);

CREATE INDEX capacity_samples_at_idx ON capacity_samples (at);

CREATE TABLE capacity_warnings (
    provisioner TEXT NOT NULL,
    kind        TEXT NOT NULL,
    active      INTEGER NOT NULL CONSTRAINT capacity_warnings_active_check CHECK (active IN (0, 1)),
    message     TEXT NOT NULL DEFAULT '',
    since       TEXT NOT NULL,
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (provisioner, kind)
);
