-- 0015: the SQLite dialect of the PostgreSQL migration of the same name: why a resource is in
-- its status, and the times the state machine keeps beside it, as columns the agent writes
-- in the same statement as the status, so that no code reads them back out of the status
-- message (which is for people only).
--
--   * reason: one CamelCase word from the status's closed list (domain.ReasonsByStatus); a
--     new row is 'Created', which is what the claim starts;
--   * waiting_since: when the resource began waiting for capacity; set while the reason is
--     'WaitingForCapacity' and kept across its retries, NULL otherwise;
--   * last_attempt_at: when the agent last recorded the outcome of an attempt; NULL before
--     the first.
--
-- The columns are added in place (no rebuild of the table); their times are text in the
-- stored form of the other time columns. No trigger rewrites them into that form, as
-- resources_after_update does the others, so their CHECK constraints take that form only. The DELETE trigger's
-- delete request sets the reason 'DeleteRequested'.
--
-- The backfill reads the status and message of the rows as the agent wrote them before this
-- migration, once; last_attempt_at stays NULL, as no column says when an attempt was last
-- recorded. The backfill is no change of the rows: the update trigger is held while it runs
-- (the directive below; the migration runner drops it and creates it again as it was), so
-- updated_at is kept and no event is recorded.
--
-- berth:hold-triggers resources_after_update

ALTER TABLE resources ADD COLUMN reason TEXT NOT NULL DEFAULT 'Created';
ALTER TABLE resources ADD COLUMN waiting_since TEXT
    CONSTRAINT resources_waiting_since_check CHECK (waiting_since IS NULL OR waiting_since = strftime('%Y-%m-%dT%H:%M:%fZ', waiting_since));
ALTER TABLE resources ADD COLUMN last_attempt_at TEXT
    CONSTRAINT resources_last_attempt_at_check CHECK (last_attempt_at IS NULL OR last_attempt_at = strftime('%Y-%m-%dT%H:%M:%fZ', last_attempt_at));

UPDATE resources
   SET reason = CASE status
           WHEN 'pending' THEN CASE WHEN status_message = '' THEN 'Created' ELSE 'WaitingForCapacity' END
           WHEN 'provisioning' THEN CASE
               WHEN status_message GLOB 'attempt [0-9]* failed*' THEN 'Backoff'
               WHEN status_message GLOB '*: waiting for it to serve' THEN 'AwaitingReady'
               ELSE 'Provisioning' END
           WHEN 'ready' THEN CASE WHEN status_message GLOB '*passing again*' THEN 'Recovered' ELSE 'Available' END
           WHEN 'unhealthy' THEN 'HealthCheckFailed'
           WHEN 'error' THEN CASE WHEN status_message GLOB '* is not JSON Berth can read: *' THEN 'UnreadableRow' ELSE 'BrokerError' END
           WHEN 'deleting' THEN CASE
               WHEN status_message = 'delete requested' THEN 'DeleteRequested'
               WHEN status_message GLOB 'deprovision attempt [0-9]* failed*' THEN 'Backoff'
               ELSE 'DeleteRequested' END
           WHEN 'hibernating' THEN CASE WHEN status_message GLOB 'hibernate attempt [0-9]* failed*' THEN 'Backoff' ELSE 'Hibernating' END
           WHEN 'hibernated' THEN 'Hibernated'
           ELSE reason END,
       -- 'waiting for capacity since 2026-01-02T03:04:05Z: why'; a row waiting that does not
       -- say since when has waited since its status last changed.
       waiting_since = CASE WHEN status = 'pending' AND status_message <> '' THEN coalesce(
           CASE WHEN status_message GLOB 'waiting for capacity since [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T*: *'
                THEN strftime('%Y-%m-%dT%H:%M:%fZ', substr(status_message, 28, instr(substr(status_message, 28), ': ') - 1)) END,
           status_changed_at) END
 WHERE status <> 'pending' OR status_message <> '';

DROP TRIGGER resources_before_delete;
CREATE TRIGGER resources_before_delete
    BEFORE DELETE ON resources
    WHEN NOT EXISTS (SELECT 1 FROM write_intents WHERE resource_id = OLD.id AND intent = 'finalize')
BEGIN
    UPDATE resources
       SET status = 'deleting',
           status_message = 'delete requested',
           reason = 'DeleteRequested',
           waiting_since = NULL,
           next_attempt_at = NULL,
           attempts = 0
     WHERE id = OLD.id AND status <> 'deleting';
    SELECT RAISE(IGNORE);
END;
