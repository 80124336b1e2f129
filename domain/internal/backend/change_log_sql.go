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

// NewestChangesSQL reads the newest up to $3 entries after $2, in seq order, each with its
// owner (ChangeOwnerSQL) and whether no entry of that owner lies after $1 and before the
// oldest of them, which is at most $4 entries past $1 (domain.ChangeLog.NewestChanges).
// The owners are looked for once each, and an owner found in the first entry after $1
// stops its scan there; an entry written without an owner (before migration 0028) counts
// as every owner's. %s is the resource id's column as text.
const NewestChangesSQL = `WITH tail AS (
	SELECT c.seq, c.resource_id, ` + ChangeOwnerSQL + ` AS owner FROM change_log c
	 WHERE c.seq > $2 ORDER BY c.seq DESC LIMIT $3
), oldest AS (SELECT min(seq) AS seq FROM tail), behind AS (
	SELECT o.owner FROM (SELECT DISTINCT owner FROM tail) o, oldest
	 WHERE oldest.seq - $1 > $4 OR EXISTS (
		SELECT 1 FROM change_log m WHERE m.seq > $1 AND m.seq < oldest.seq AND (m.owner = o.owner OR m.owner IS NULL))
)
SELECT t.seq, %s, t.owner, t.owner NOT IN (SELECT owner FROM behind) FROM tail t ORDER BY t.seq`
