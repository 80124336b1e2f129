-- 0010: resources_after_update does the same for every writer at a fraction of the cost.
-- Its second UPDATE of the row (SQLite's stand-in for assigning to NEW) runs only when it
-- changes something: new args, a delete request or a provisioner change to act on, a time
-- not yet in the stored form, an unhealthy_since to clear, or an updated_at the writer did
-- not move forward itself. A writer that sets updated_at as the trigger would, in the stored
-- form, and leaves args alone (the agent's progress writes do) has its row written once
-- instead of twice. Whether args changed is decided on the text first: json() parses both
-- sides only when the texts differ; a time is put in the stored form only when it changed
-- (a value the row already held is in that form: every write of a time passes through these
-- triggers, and a copy of the store writes the stored form). What each column ends up
-- holding, the change log and the history are those of 0002.

DROP TRIGGER resources_after_update;
CREATE TRIGGER resources_after_update
    AFTER UPDATE ON resources
BEGIN
    UPDATE resources
       SET generation       = CASE WHEN NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args) THEN OLD.generation + 1 ELSE NEW.generation END,
           attempts         = CASE WHEN (NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
                      OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                      OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner) THEN 0 ELSE NEW.attempts END,
           next_attempt_at  = CASE WHEN (NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
                      OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                      OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner) THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', NEW.next_attempt_at) END,
           last_error       = CASE WHEN (NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
                      OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                      OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner) THEN '' ELSE NEW.last_error END,
           lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.lease_expires_at),
           created_at       = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at),
           ready_at         = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.ready_at),
           unhealthy_since  = CASE WHEN NEW.status = 'unhealthy' THEN strftime('%Y-%m-%dT%H:%M:%fZ', NEW.unhealthy_since) END,
           updated_at       = CASE WHEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') > OLD.updated_at THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                                   ELSE strftime('%Y-%m-%dT%H:%M:%fZ', OLD.updated_at, '+0.001 seconds') END
     WHERE id = NEW.id
       AND ((NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
            OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
            OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
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
                     OR (NEW.unhealthy_since IS NOT OLD.unhealthy_since AND NEW.unhealthy_since IS NOT strftime('%Y-%m-%dT%H:%M:%fZ', NEW.unhealthy_since)))));
    INSERT INTO change_log (resource_id)
    SELECT NEW.id
     WHERE (NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
        OR NEW.generation IS NOT OLD.generation
        OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner)
        OR (NEW.status = 'deleting' AND OLD.status IS NOT 'deleting');
    INSERT INTO resource_events (resource_id, kind, status, message)
    SELECT NEW.id,
           CASE WHEN w.health THEN 'health'
                WHEN NEW.status = 'error'
                  OR (NEW.attempts > OLD.attempts AND NOT ((NEW.args IS NOT OLD.args AND json(NEW.args) IS NOT json(OLD.args))
                              OR (NEW.status = 'deleting' AND OLD.status <> 'deleting')
                              OR (OLD.provisioner <> '' AND NEW.provisioner IS NOT OLD.provisioner))) THEN 'error'
                ELSE 'status' END,
           NEW.status, NEW.status_message
      FROM (SELECT EXISTS (SELECT 1 FROM write_intents WHERE resource_id = NEW.id AND intent = 'health') AS health) AS w
     WHERE NEW.status IS NOT OLD.status
        OR (NEW.status_message IS NOT OLD.status_message AND NOT w.health);
END;
