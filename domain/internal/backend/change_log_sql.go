package backend

// The statements on change_log that both dialects write alike.

// LogChangeSQL logs a change of resource $1, with its owner.
const LogChangeSQL = `INSERT INTO change_log (resource_id, owner) VALUES ($1, (SELECT owner FROM resources WHERE id = $1))`

// ChangeOwnerSQL is the owner of change-log entry c's resource: the one the entry carries,
// or, for an entry written without one (before migration 0028), the resource's now ("" once
// its row is gone). COALESCE stops at the first value that is not NULL, so the resources
// row is read only for those, and by key: on PostgreSQL a join let the planner hash the
// whole resources table for every page, which cost a burst's reads ten times as much.
const ChangeOwnerSQL = `coalesce(c.owner, (SELECT r.owner FROM resources r WHERE r.id = c.resource_id), '')`

// LatestChangeSQL reads the newest change's seq (0 for none).
const LatestChangeSQL = `SELECT coalesce(max(seq), 0) FROM change_log`
