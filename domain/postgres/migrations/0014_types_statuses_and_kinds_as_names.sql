-- 0014: the schema keeps no list of the values the agent checks itself. resources.type,
-- resources.status and resource_events.kind lose their CHECK constraints, so that a resource
-- type an environ declares, a new status or a new event kind needs no migration. The agent
-- checks them instead: the Service refuses a type no environ serves (naming those served),
-- the stores refuse a status the state machine lacks, and the provisioner fails a row of an
-- unserved type that a client wrote with plain SQL (environ.UnknownTypeError), naming the
-- type and the served ones.

ALTER TABLE resources DROP CONSTRAINT resources_type_check;
ALTER TABLE resources DROP CONSTRAINT resources_status_check;
ALTER TABLE resource_events DROP CONSTRAINT resource_events_kind_check;
