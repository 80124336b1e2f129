-- 0001: the resources table, its change log and slot reservations. This is the SQLite
-- dialect of the PostgreSQL migration of the same name: the same tables and columns, and the
-- same behaviour for every writer.
--
-- Representation: ids are lowercase UUID text; JSON columns are text holding JSON; times are
-- UTC text of one fixed width, 2026-01-02T03:04:05.678Z (strftime('%Y-%m-%dT%H:%M:%fZ', ...)),
-- so that comparing them as text compares them as times. A time written to resources in another
-- form SQLite understands ('2026-01-02 03:04:05', '2026-01-02T05:04:05+02:00') is rewritten into
-- that form by the triggers; one it cannot read is refused. (The other tables' times are written
-- by the triggers and by Berth itself.)
--
-- Clients may write these tables with plain SQL; the triggers below give such writes the same
-- behaviour as the CLI:
--
--   * changing args bumps generation and resets the retry bookkeeping;
--   * changes of desired state (a new row, new args, a provisioner change, a delete request,
--     the row's removal) are appended to change_log, while the agent's own progress writes
--     (status, state, config, lease, pinning an unset provisioner) are not, so the agent never
--     wakes itself;
--   * a DELETE is turned into a delete request: the row moves to status 'deleting' and stays
--     until the agent has freed what the environ holds for it. Only a DELETE of a row whose id
--     is in write_intents with intent 'finalize' (the agent, once the environ let go) removes
--     the row; the removal clears the intent.
--
-- SQLite triggers cannot assign to NEW, so what PostgreSQL's BEFORE UPDATE trigger does to the
-- row is done by resources_after_update with a second UPDATE of the same row. That UPDATE does
-- not fire resources_after_update again as long as recursive_triggers is off (the default).
-- SQLite has no transaction-local settings either: write_intents stands in for PostgreSQL's
-- SET LOCAL berth.*, one row per resource a writer means something special by its next write.

CREATE TABLE resources (
    id                  TEXT NOT NULL PRIMARY KEY
                        DEFAULT (lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' ||
                          substr('89ab', 1 + abs(random() % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))))
                        CONSTRAINT resources_id_check CHECK (id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
    type                TEXT NOT NULL
                        CONSTRAINT resources_type_check CHECK (type IN ('runtime', 'clickhouse')),
    name                TEXT NOT NULL
                        CONSTRAINT resources_name_check CHECK (trim(name) <> ''),
    owner               TEXT NOT NULL DEFAULT '',
    provisioner         TEXT NOT NULL DEFAULT '',
    args                TEXT NOT NULL DEFAULT '{}'
                        CONSTRAINT resources_args_check CHECK (CASE WHEN json_valid(args) THEN json_type(args) = 'object' ELSE 0 END),
    generation          INTEGER NOT NULL DEFAULT 1,
    observed_generation INTEGER NOT NULL DEFAULT 0,
    status              TEXT NOT NULL DEFAULT 'pending'
                        CONSTRAINT resources_status_check
                        CHECK (status IN ('pending', 'provisioning', 'ready', 'unhealthy', 'error', 'deleting')),
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
    CONSTRAINT resources_times_check CHECK (
        strftime('%Y-%m-%dT%H:%M:%fZ', created_at) IS NOT NULL AND strftime('%Y-%m-%dT%H:%M:%fZ', updated_at) IS NOT NULL
        AND (next_attempt_at IS NULL OR strftime('%Y-%m-%dT%H:%M:%fZ', next_attempt_at) IS NOT NULL)
        AND (lease_expires_at IS NULL OR strftime('%Y-%m-%dT%H:%M:%fZ', lease_expires_at) IS NOT NULL)
        AND (ready_at IS NULL OR strftime('%Y-%m-%dT%H:%M:%fZ', ready_at) IS NOT NULL))
);

CREATE UNIQUE INDEX resources_owner_type_name_key ON resources (owner, type, lower(name));

-- Serves the agent's "what needs work" query; its predicate is that query's WHERE clause, so
-- the index holds only rows the agent has work on.
CREATE INDEX resources_needing_attention_idx ON resources (next_attempt_at)
    WHERE status IN ('pending', 'provisioning', 'deleting', 'error')
       OR generation <> observed_generation;

-- AUTOINCREMENT: a sequence number is never handed out twice, even once the newest entries
-- are pruned, so a watcher's cursor never skips a new entry.
CREATE TABLE change_log (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id TEXT NOT NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE INDEX change_log_created_at_idx ON change_log (created_at);

-- A reservation is released by the environ when it frees the resource, and sweeps find orphans;
-- there is deliberately no foreign key to resources.
CREATE TABLE slot_reservations (
    provisioner TEXT NOT NULL,
    resource_id TEXT NOT NULL
                CONSTRAINT slot_reservations_resource_id_check CHECK (resource_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
    owner       TEXT NOT NULL DEFAULT '',
    host        TEXT NOT NULL,
    slots       INTEGER NOT NULL CONSTRAINT slot_reservations_slots_check CHECK (slots > 0),
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (provisioner, resource_id)
);

CREATE INDEX slot_reservations_host_idx ON slot_reservations (provisioner, host);

-- What a writer means by its next write to a resource row. 'finalize': the next DELETE of the
-- row really removes it (PostgreSQL: SET LOCAL berth.finalizing = 'on').
CREATE TABLE write_intents (
    resource_id TEXT NOT NULL,
    intent      TEXT NOT NULL,
    PRIMARY KEY (resource_id, intent)
);

-- Moving a resource to another provisioner once something may have been provisioned for it
-- would leak what the old one holds; before that, it is how a client fixes a resource that
-- named an unknown provisioner.
CREATE TRIGGER resources_provisioner_fixed
    BEFORE UPDATE OF provisioner ON resources
    WHEN OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner
     AND (OLD.status NOT IN ('pending', 'error') OR OLD.observed_generation > 0 OR json(OLD.state) <> '{}')
BEGIN
    SELECT RAISE(ABORT, 'resource ' || OLD.id || ': provisioner cannot change from "' || OLD.provisioner || '" to "'
                        || NEW.provisioner || '" once provisioning started; delete the resource and create it again');
END;

-- New args are a new generation: the agent must bring the resource to it, and failures of the
-- old args say nothing about the new ones. A delete request, and a change of a set provisioner,
-- start a fresh retry budget too. Every UPDATE sets updated_at; it moves forward by at least a
-- millisecond, so it changes on every write even within one millisecond.
--
-- Then the change is logged when it is one of desired state. A provisioner change is logged
-- only when the old value was set: the agent pins an unset provisioner in its progress writes,
-- and logging that would wake the agent for its own write.
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
           updated_at       = CASE WHEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') > OLD.updated_at THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                                   ELSE strftime('%Y-%m-%dT%H:%M:%fZ', OLD.updated_at, '+0.001 seconds') END
     WHERE id = NEW.id;
    INSERT INTO change_log (resource_id)
    SELECT NEW.id
     WHERE json(NEW.args) IS NOT json(OLD.args)
        OR NEW.generation IS NOT OLD.generation
        OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
        OR (NEW.status = 'deleting' AND OLD.status IS NOT 'deleting');
END;

CREATE TRIGGER resources_after_insert
    AFTER INSERT ON resources
BEGIN
    UPDATE resources
       SET next_attempt_at  = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at),
           lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at),
           created_at       = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at),
           updated_at       = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at),
           ready_at         = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at)
     WHERE id = NEW.id
       AND (NEW.next_attempt_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at)
            OR NEW.lease_expires_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at)
            OR NEW.created_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at)
            OR NEW.updated_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.updated_at)
            OR NEW.ready_at IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at));
    INSERT INTO change_log (resource_id) VALUES (NEW.id);
END;

-- A DELETE becomes a delete request, so the environ frees what it holds before the row goes.
-- The agent removes the row after recording the 'finalize' intent for it; an operator who
-- really means to drop a row without deprovisioning it can do the same:
--   INSERT INTO write_intents (resource_id, intent) VALUES ('<id>', 'finalize');
--   DELETE FROM resources WHERE id = '<id>';
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
END;

CREATE TRIGGER resources_after_delete
    AFTER DELETE ON resources
BEGIN
    DELETE FROM write_intents WHERE resource_id = OLD.id;
    INSERT INTO change_log (resource_id) VALUES (OLD.id);
END;
