-- 0014: the SQLite dialect of the PostgreSQL migration of the same name: the schema keeps no
-- list of the values the agent checks itself. resources.type, resources.status and
-- resource_events.kind lose their CHECK constraints, so that a resource type an environ
-- declares, a new status or a new event kind needs no migration at all, let alone another
-- rebuild of these tables. The agent checks them instead: the Service refuses a type no
-- environ serves (naming those served), the stores refuse a status the state machine lacks,
-- and the provisioner fails a row of an unserved type that a client wrote with plain SQL
-- (environ.UnknownTypeError), naming the type and the served ones.
--
-- SQLite cannot drop a CHECK constraint, so both tables are built again under their names, as
-- 0011 built them (rows, rowids and sequence positions kept), with every other constraint,
-- index and trigger exactly as it was: the statements below are those the schema held,
-- without the three constraints.

PRAGMA legacy_alter_table = ON;

DROP TRIGGER resources_provisioner_fixed;
DROP TRIGGER resources_hibernate_not_deleting;
DROP TRIGGER resources_labels_strings_insert;
DROP TRIGGER resources_labels_strings_update;
DROP TRIGGER resources_after_update;
DROP TRIGGER resources_after_insert;
DROP TRIGGER resources_before_delete;
DROP TRIGGER resources_after_delete;
DROP TRIGGER resources_deleting_final;

CREATE TABLE resources_new (
    id                  TEXT NOT NULL PRIMARY KEY
                        DEFAULT (lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' ||
                          substr('89ab', 1 + abs(random() % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))))
                        CONSTRAINT resources_id_check CHECK (id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
    type                TEXT NOT NULL,
    name                TEXT NOT NULL
                        CONSTRAINT resources_name_check CHECK (trim(name) <> ''),
    owner               TEXT NOT NULL DEFAULT '',
    provisioner         TEXT NOT NULL DEFAULT '',
    args                TEXT NOT NULL DEFAULT '{}'
                        CONSTRAINT resources_args_check CHECK (CASE WHEN json_valid(args) THEN json_type(args) = 'object' ELSE 0 END),
    generation          INTEGER NOT NULL DEFAULT 1,
    observed_generation INTEGER NOT NULL DEFAULT 0,
    status              TEXT NOT NULL DEFAULT 'pending',
    status_message      TEXT NOT NULL DEFAULT '',
    state               TEXT NOT NULL DEFAULT '{}' CONSTRAINT resources_state_check CHECK (json_valid(state)),
    config              TEXT NOT NULL DEFAULT '{}' CONSTRAINT resources_config_check CHECK (json_valid(config)),
    attempts            INTEGER NOT NULL DEFAULT 0,
    next_attempt_at     TEXT,
    last_error          TEXT NOT NULL DEFAULT '',
    lease_holder        TEXT,
    lease_expires_at    TEXT,
    created_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    ready_at            TEXT,
    unhealthy_since     TEXT
                        CONSTRAINT resources_unhealthy_since_check CHECK (unhealthy_since IS NULL OR strftime('%Y-%m-%dT%H:%M:%fZ', unhealthy_since) IS NOT NULL),
    lease_token         INTEGER NOT NULL DEFAULT 0,
    labels              TEXT NOT NULL DEFAULT '{}'
                        CONSTRAINT resources_labels_check CHECK (CASE WHEN json_valid(labels) THEN json_type(labels) = 'object' ELSE 0 END),
    paused              INTEGER NOT NULL DEFAULT 0 CONSTRAINT resources_paused_check CHECK (paused IN (0, 1)),
    hibernate           INTEGER NOT NULL DEFAULT 0 CONSTRAINT resources_hibernate_check CHECK (hibernate IN (0, 1)),
    retry_requested_at  TEXT,
    status_changed_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    CONSTRAINT resources_times_check CHECK (
        strftime('%Y-%m-%dT%H:%M:%fZ', created_at) IS NOT NULL AND strftime('%Y-%m-%dT%H:%M:%fZ', updated_at) IS NOT NULL
        AND (next_attempt_at IS NULL OR strftime('%Y-%m-%dT%H:%M:%fZ', next_attempt_at) IS NOT NULL)
        AND (lease_expires_at IS NULL OR strftime('%Y-%m-%dT%H:%M:%fZ', lease_expires_at) IS NOT NULL)
        AND (ready_at IS NULL OR strftime('%Y-%m-%dT%H:%M:%fZ', ready_at) IS NOT NULL)
        AND (retry_requested_at IS NULL OR strftime('%Y-%m-%dT%H:%M:%fZ', retry_requested_at) IS NOT NULL)
        AND strftime('%Y-%m-%dT%H:%M:%fZ', status_changed_at) IS NOT NULL)
);;

INSERT INTO resources_new (rowid, id, type, name, owner, provisioner, args, generation, observed_generation, status,
                           status_message, state, config, attempts, next_attempt_at, last_error, lease_holder,
                           lease_expires_at, created_at, updated_at, ready_at, unhealthy_since, lease_token, labels,
                           paused, hibernate, retry_requested_at, status_changed_at)
SELECT rowid, id, type, name, owner, provisioner, args, generation, observed_generation, status,
       status_message, state, config, attempts, next_attempt_at, last_error, lease_holder,
       lease_expires_at, created_at, updated_at, ready_at, unhealthy_since, lease_token, labels,
       paused, hibernate, retry_requested_at, status_changed_at
  FROM resources;
DROP TABLE resources;
ALTER TABLE resources_new RENAME TO resources;

CREATE UNIQUE INDEX resources_owner_type_name_key ON resources (owner, type, lower(name));;
CREATE INDEX resources_needing_attention_idx ON resources (next_attempt_at)
    WHERE (NOT paused AND (status IN ('pending', 'provisioning', 'deleting', 'error', 'hibernating')
       OR (hibernate AND status <> 'hibernated')
       OR (NOT hibernate AND (status = 'hibernated' OR generation <> observed_generation))));;
CREATE INDEX resources_checkable_idx ON resources (id) WHERE status IN ('ready', 'unhealthy');;
CREATE INDEX resources_lease_holder_idx ON resources (lease_holder) WHERE lease_holder IS NOT NULL;;

CREATE TABLE resource_events_new (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id TEXT NOT NULL,
    at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    kind        TEXT NOT NULL,
    status      TEXT NOT NULL,
    message     TEXT NOT NULL DEFAULT ''
);;

INSERT INTO resource_events_new (seq, resource_id, at, kind, status, message)
SELECT seq, resource_id, at, kind, status, message FROM resource_events;
-- The sequence goes on from where the old table's stopped, pruned entries included.
DELETE FROM sqlite_sequence WHERE name = 'resource_events_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'resource_events_new', max(seq) FROM (
    SELECT seq FROM sqlite_sequence WHERE name = 'resource_events'
    UNION ALL SELECT coalesce(max(seq), 0) FROM resource_events_new);
DROP TABLE resource_events;
ALTER TABLE resource_events_new RENAME TO resource_events;

PRAGMA legacy_alter_table = OFF;

CREATE INDEX resource_events_resource_idx ON resource_events (resource_id, seq);;
CREATE INDEX resource_events_at_idx ON resource_events (at);;

-- The triggers as they were, in the order they were made, so that where several apply to one
-- write they run in the order they ran before.
CREATE TRIGGER resources_provisioner_fixed
    BEFORE UPDATE OF provisioner ON resources
    WHEN OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner
     AND (OLD.status NOT IN ('pending', 'error') OR OLD.observed_generation > 0 OR json(OLD.state) <> '{}')
BEGIN
    SELECT RAISE(ABORT, 'provisioner cannot change once provisioning started (the resource left pending or error, or has state): delete the resource and create it again');
END;;

CREATE TRIGGER resources_hibernate_not_deleting
    BEFORE UPDATE OF hibernate ON resources
    WHEN NEW.hibernate IS NOT OLD.hibernate AND OLD.status = 'deleting'
BEGIN
    SELECT RAISE(ABORT, 'the resource is being deleted: it cannot be hibernated or woken (hibernate cannot change while its status is deleting)');
END;;

CREATE TRIGGER resources_labels_strings_insert
    BEFORE INSERT ON resources
    WHEN CASE WHEN json_valid(NEW.labels) AND json_type(NEW.labels) = 'object'
              THEN EXISTS (SELECT 1 FROM json_each(NEW.labels) WHERE type <> 'text') ELSE 0 END
BEGIN
    SELECT RAISE(ABORT, 'labels must be a JSON object of string values, e.g. {"team": "data"}');
END;;

CREATE TRIGGER resources_labels_strings_update
    BEFORE UPDATE OF labels ON resources
    WHEN CASE WHEN json_valid(NEW.labels) AND json_type(NEW.labels) = 'object'
              THEN EXISTS (SELECT 1 FROM json_each(NEW.labels) WHERE type <> 'text') ELSE 0 END
BEGIN
    SELECT RAISE(ABORT, 'labels must be a JSON object of string values, e.g. {"team": "data"}');
END;;

CREATE TRIGGER resources_after_update
    AFTER UPDATE ON resources
BEGIN
    UPDATE resources
       SET generation       = CASE WHEN (NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
                                     OR (NEW.labels IS NOT OLD.labels AND json(NEW.labels) IS NOT json(OLD.labels))
                                   THEN OLD.generation + 1 ELSE NEW.generation END,
           attempts         = CASE WHEN (NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
                      OR (NEW.labels IS NOT OLD.labels AND json(NEW.labels) IS NOT json(OLD.labels))
                      OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                      OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
                      OR NEW.hibernate IS NOT OLD.hibernate
                      OR NEW.retry_requested_at IS NOT OLD.retry_requested_at THEN 0 ELSE NEW.attempts END,
           next_attempt_at  = CASE WHEN (NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
                      OR (NEW.labels IS NOT OLD.labels AND json(NEW.labels) IS NOT json(OLD.labels))
                      OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                      OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
                      OR NEW.hibernate IS NOT OLD.hibernate
                      OR NEW.retry_requested_at IS NOT OLD.retry_requested_at THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at) END,
           last_error       = CASE WHEN (NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
                      OR (NEW.labels IS NOT OLD.labels AND json(NEW.labels) IS NOT json(OLD.labels))
                      OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                      OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
                      OR NEW.hibernate IS NOT OLD.hibernate
                      OR NEW.retry_requested_at IS NOT OLD.retry_requested_at THEN '' ELSE NEW.last_error END,
           lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at),
           created_at       = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at),
           ready_at         = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at),
           unhealthy_since  = CASE WHEN NEW.status = 'unhealthy' THEN strftime('%Y-%m-%dT%H:%M:%fZ', NEW.unhealthy_since) END,
           retry_requested_at = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.retry_requested_at),
           status_changed_at = CASE WHEN NEW.status IS NOT OLD.status THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                                    ELSE strftime('%Y-%m-%dT%H:%M:%fZ', NEW.status_changed_at) END,
           updated_at       = CASE WHEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') > OLD.updated_at THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                                   ELSE strftime('%Y-%m-%dT%H:%M:%fZ', OLD.updated_at, '+0.001 seconds') END
     WHERE id = NEW.id
       AND ((NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
            OR (NEW.labels IS NOT OLD.labels AND json(NEW.labels) IS NOT json(OLD.labels))
            OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
            OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
            OR NEW.hibernate IS NOT OLD.hibernate
            OR NEW.retry_requested_at IS NOT OLD.retry_requested_at
            OR NOT (NEW.updated_at > OLD.updated_at
                    AND (NEW.updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                         OR (strftime('%Y-%m-%dT%H:%M:%fZ', 'now') <= OLD.updated_at
                             AND NEW.updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', OLD.updated_at, '+0.001 seconds'))))
            OR (NEW.next_attempt_at IS NOT OLD.next_attempt_at AND NEW.next_attempt_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at))
            OR (NEW.lease_expires_at IS NOT OLD.lease_expires_at AND NEW.lease_expires_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at))
            OR (NEW.created_at IS NOT OLD.created_at AND NEW.created_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at))
            OR (NEW.ready_at IS NOT OLD.ready_at AND NEW.ready_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at))
            OR (NEW.unhealthy_since IS NOT NULL
                AND (NEW.status IS NOT 'unhealthy'
                     OR (NEW.unhealthy_since IS NOT OLD.unhealthy_since AND NEW.unhealthy_since IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.unhealthy_since))))
            OR (NEW.status IS NOT OLD.status AND NEW.status_changed_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
            OR (NEW.status IS OLD.status AND NEW.status_changed_at IS NOT OLD.status_changed_at
                AND NEW.status_changed_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.status_changed_at)));
    INSERT INTO change_log (resource_id)
    SELECT NEW.id
     WHERE (NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
        OR (NEW.labels IS NOT OLD.labels AND json(NEW.labels) IS NOT json(OLD.labels))
        OR NEW.generation IS NOT OLD.generation
        OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
        OR (NEW.status = 'deleting' AND OLD.status IS NOT 'deleting')
        OR NEW.paused IS NOT OLD.paused
        OR NEW.hibernate IS NOT OLD.hibernate
        OR NEW.retry_requested_at IS NOT OLD.retry_requested_at;
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT NEW.id,
           CASE WHEN w.health THEN 'health'
                WHEN NEW.status = 'error'
                  OR (NEW.attempts > OLD.attempts AND NOT ((NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
                              OR (NEW.labels IS NOT OLD.labels AND json(NEW.labels) IS NOT json(OLD.labels))
                              OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                              OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
                              OR NEW.hibernate IS NOT OLD.hibernate
                              OR NEW.retry_requested_at IS NOT OLD.retry_requested_at)) THEN 'error'
                ELSE 'status' END,
           NEW.status, NEW.status_message
      FROM (SELECT EXISTS (SELECT 1 FROM write_intents WHERE resource_id = NEW.id AND intent = 'health') AS health) AS w
     WHERE NEW.status IS NOT OLD.status
        OR (NEW.status_message IS NOT OLD.status_message AND NOT w.health);
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT NEW.id, 'control', NEW.status, CASE WHEN NEW.paused THEN 'paused' ELSE 'resumed' END
     WHERE NEW.paused IS NOT OLD.paused;
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT NEW.id, 'control', NEW.status, CASE WHEN NEW.hibernate THEN 'hibernate requested' ELSE 'wake requested' END
     WHERE NEW.hibernate IS NOT OLD.hibernate;
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT NEW.id, 'control', NEW.status, 'retry requested'
     WHERE NEW.retry_requested_at IS NOT OLD.retry_requested_at;
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT NEW.id, 'control', NEW.status, 'labels changed: ' || coalesce(
               (SELECT group_concat(key || '=' || value, ', ') FROM (SELECT key, value FROM json_each(NEW.labels) ORDER BY key)), 'none')
     WHERE NEW.labels IS NOT OLD.labels AND json(NEW.labels) IS NOT json(OLD.labels);
END;;

CREATE TRIGGER resources_after_insert
    AFTER INSERT ON resources
BEGIN
    UPDATE resources
       SET next_attempt_at    = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at),
           lease_expires_at   = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at),
           created_at         = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at),
           updated_at         = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at),
           ready_at           = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at),
           unhealthy_since    = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.unhealthy_since),
           retry_requested_at = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.retry_requested_at),
           status_changed_at  = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.status_changed_at)
     WHERE id = NEW.id
       AND (NEW.next_attempt_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at)
            OR NEW.lease_expires_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at)
            OR NEW.created_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at)
            OR NEW.updated_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at)
            OR NEW.ready_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at)
            OR NEW.unhealthy_since IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.unhealthy_since)
            OR NEW.retry_requested_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.retry_requested_at)
            OR NEW.status_changed_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.status_changed_at));
    INSERT INTO change_log (resource_id) VALUES (NEW.id);
    INSERT INTO resource_events (resource_id, kind, status, message)
    VALUES (NEW.id, 'status', NEW.status, coalesce(nullif(NEW.status_message, ''), 'created'));
END;;

CREATE TRIGGER resources_before_delete
    BEFORE DELETE ON resources
    WHEN NOT EXISTS (SELECT 1 FROM write_intents WHERE resource_id = OLD.id AND intent = 'finalize')
BEGIN
    UPDATE resources
       SET status = 'deleting',
           status_message = 'delete requested',
           next_attempt_at = NULL,
           attempts = 0
     WHERE id = OLD.id AND status <> 'deleting';
    SELECT RAISE(IGNORE);
END;;

CREATE TRIGGER resources_after_delete
    AFTER DELETE ON resources
BEGIN
    DELETE FROM write_intents WHERE resource_id = OLD.id;
    INSERT INTO change_log (resource_id) VALUES (OLD.id);
    INSERT INTO resource_events (resource_id, kind, status, message)
    VALUES (OLD.id, 'status', OLD.status, 'removed');
END;;

CREATE TRIGGER resources_deleting_final
    BEFORE UPDATE OF status ON resources
    WHEN OLD.status = 'deleting' AND NEW.status <> 'deleting'
BEGIN
    SELECT RAISE(ABORT, 'the resource is being deleted: its status stays deleting until the agent has deprovisioned it and removed the row; create the resource again afterwards');
END;;
