-- 0028: the SQLite dialect of the PostgreSQL migration of the same name: each change-log
-- entry carries its resource's owner as the write it records left it, a removal's entry the
-- removed row's owner. The read took the owner from a join with resources for each entry,
-- and could only give '' for a removed row. Entries written before this migration keep owner
-- NULL, and the read looks those up as before: nothing is backfilled.
--
-- The three triggers that write the change log are created again as 0014 left them, with
-- the owner written beside the resource id.

ALTER TABLE change_log ADD COLUMN owner TEXT;

DROP TRIGGER resources_after_update;
DROP TRIGGER resources_after_insert;
DROP TRIGGER resources_after_delete;

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
    INSERT INTO change_log (resource_id, owner)
    SELECT NEW.id, NEW.owner
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
END;

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
    INSERT INTO change_log (resource_id, owner) VALUES (NEW.id, NEW.owner);
    INSERT INTO resource_events (resource_id, kind, status, message)
    VALUES (NEW.id, 'status', NEW.status, coalesce(nullif(NEW.status_message, ''), 'created'));
END;

CREATE TRIGGER resources_after_delete
    AFTER DELETE ON resources
BEGIN
    DELETE FROM write_intents WHERE resource_id = OLD.id;
    INSERT INTO change_log (resource_id, owner) VALUES (OLD.id, OLD.owner);
    INSERT INTO resource_events (resource_id, kind, status, message)
    VALUES (OLD.id, 'status', OLD.status, 'removed');
END;
